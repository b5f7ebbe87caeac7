import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine, type RestoreProgress } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import {
  engineCountingBlockRequests,
  type BlockRequestCount,
} from '../helpers/counted-block-requests.ts';
import { loginWithBucket, runCanopy, runCanopyIn } from '../helpers/canopy-cli.ts';
import { firstBackup } from '../helpers/first-backup.ts';
import { accessTimesOf } from '../helpers/access-times.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// A restore run again into a folder that holds part of the version already (the first run was
// stopped, or the files are restored to where they came from): what is there byte for byte is
// left as it is and not fetched again, and only what is missing or differs is restored, a file
// that differs beside the user's own as always.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restore-again-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const MiB = 1024 * 1024;
let engine: Engine;
/** The blocks/car requests the storage host received: each asks for a batch of leaves. */
let leavesAsked: BlockRequestCount;

/** Every entry below `dir` by its path, sorted. */
function entriesBelow(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort();
}

beforeAll(async () => {
  mkdirSync(path.join(source, 'notes'), { recursive: true });
  writeFileSync(path.join(source, 'large.bin'), randomBytes(3 * MiB + 5));
  writeFileSync(path.join(source, 'same-size.txt'), 'the backed-up words');
  writeFileSync(path.join(source, 'notes', 'a.txt'), 'note a');
  writeFileSync(path.join(source, 'notes', 'b.txt'), 'note b');
  writeFileSync(path.join(source, 'empty'), '');
  symlinkSync('notes/a.txt', path.join(source, 'link'));
  ({ engine, count: leavesAsked } = engineCountingBlockRequests(home));
  await firstBackup(engine, source, 'Again');
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a restore run again', () => {
  it('leaves what is there byte for byte, fetches none of it, and restores only what is missing or differs', async () => {
    const target = path.join(scratch, 'target');
    const first = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(first).toMatchObject({ files: 5, symlinks: 1, alreadyThere: 0, renamed: [] });
    expect(leavesAsked.blocksCar).toBeGreaterThan(0);
    const whole = entriesBelow(target);

    leavesAsked.blocksCar = 0;
    // A plain read would set each restored file's access time to now (relatime: setting its
    // mtime made its ctime later): the comparison leaves it, as a backup leaves its files'.
    const accessTimes = accessTimesOf(target);
    const again = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(again).toMatchObject({ files: 0, symlinks: 0, alreadyThere: 6, renamed: [] });
    expect(leavesAsked.blocksCar).toBe(0);
    expect(entriesBelow(target)).toEqual(whole);
    expect(accessTimesOf(target)).toEqual(accessTimes);

    // The user's own changes: one file with other words of the same length, a large one with
    // its last byte changed, one deleted, and one touched with its content as it was.
    writeFileSync(path.join(target, 'same-size.txt'), 'the user edited it!');
    const large = readFileSync(path.join(target, 'large.bin'));
    large[large.length - 1] = (large[large.length - 1] ?? 0) ^ 0xff;
    writeFileSync(path.join(target, 'large.bin'), large);
    unlinkSync(path.join(target, 'notes', 'b.txt'));
    const touched = new Date('2020-02-02T02:02:02Z');
    utimesSync(path.join(target, 'notes', 'a.txt'), touched, touched);

    const third = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(third).toMatchObject({ files: 3, symlinks: 0, alreadyThere: 3 });
    expect([...third.renamed].sort()).toEqual(['large (restored).bin', 'same-size (restored).txt']);
    expect(readFileSync(path.join(target, 'same-size.txt'), 'utf8')).toBe('the user edited it!');
    expect(readFileSync(path.join(target, 'same-size (restored).txt'), 'utf8')).toBe(
      'the backed-up words',
    );
    expect(readFileSync(path.join(target, 'large.bin')).equals(large)).toBe(true);
    expect(
      readFileSync(path.join(target, 'large (restored).bin')).equals(
        readFileSync(path.join(source, 'large.bin')),
      ),
    ).toBe(true);
    expect(readFileSync(path.join(target, 'notes', 'b.txt'), 'utf8')).toBe('note b');
    // Left as the user had it: same content, their mtime.
    expect(statSync(path.join(target, 'notes', 'a.txt')).mtime).toEqual(touched);

    // Run once more: the copies it put beside the user's edits hold the version's bytes, so
    // it leaves them, fetches nothing and makes no " (restored 2)".
    const restoredBefore = [
      { path: 'large.bin', as: 'large (restored).bin' },
      { path: 'same-size.txt', as: 'same-size (restored).txt' },
    ];
    const withCopies = entriesBelow(target);
    leavesAsked.blocksCar = 0;
    const fourth = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(fourth).toMatchObject({ files: 0, alreadyThere: 4, renamed: [], restoredBefore });
    expect(leavesAsked.blocksCar).toBe(0);
    expect(entriesBelow(target)).toEqual(withCopies);
    const plan = await engine.planRestore({ bucket: 'Again', to: target, overwrite: false });
    expect(plan).toMatchObject({ files: 0, alreadyThere: 4, beside: [], restoredBefore });

    // A copy the user edited since is theirs now: the version's goes beside it too.
    writeFileSync(path.join(target, 'same-size (restored).txt'), 'the user edited it too');
    const fifth = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(fifth).toMatchObject({
      files: 1,
      renamed: ['same-size (restored 2).txt'],
      restoredBefore: [{ path: 'large.bin', as: 'large (restored).bin' }],
    });
    expect(readFileSync(path.join(target, 'same-size (restored 2).txt'), 'utf8')).toBe(
      'the backed-up words',
    );
  });

  it('reports the files and bytes it writes as it goes, leaving out those already there', async () => {
    const target = path.join(scratch, 'progress');
    const restoreSeen = async (wanted?: string): Promise<RestoreProgress[]> => {
      const seen: RestoreProgress[] = [];
      await engine.restore({
        bucket: 'Again',
        to: target,
        overwrite: false,
        onProgress: (progress) => seen.push(progress),
        ...(wanted === undefined ? {} : { path: wanted }),
      });
      for (const [index, progress] of seen.entries()) {
        expect(progress.bytesDone).toBeGreaterThanOrEqual(seen[index - 1]?.bytesDone ?? 0);
        expect(progress.filesDone).toBeGreaterThanOrEqual(seen[index - 1]?.filesDone ?? 0);
      }
      return seen;
    };
    const large = 3 * MiB + 5;
    const all = large + 'the backed-up words'.length + 'note a'.length + 'note b'.length;
    expect((await restoreSeen()).at(-1)).toEqual({
      phase: 'restoring',
      filesDone: 5,
      filesTotal: 5,
      bytesDone: all,
      bytesTotal: all,
      etaSeconds: 0,
    });
    unlinkSync(path.join(target, 'large.bin'));
    expect((await restoreSeen()).at(-1)).toMatchObject({
      filesDone: 1,
      filesTotal: 1,
      bytesDone: large,
      bytesTotal: large,
    });
    rmSync(path.join(target, 'notes'), { recursive: true });
    expect((await restoreSeen('notes')).at(-1)).toMatchObject({
      filesDone: 2,
      filesTotal: 2,
      bytesDone: 12,
      bytesTotal: 12,
    });
  });

  it("shows the fetch of a version's list of files, when this computer keeps no copy, as a phase of its own", async () => {
    const [active] = await engine.listVersions({ bucket: 'Again' });
    const id = active?.id ?? '';
    const cache = path.join(home, 'metadata');
    // As on a new computer: the version's metadata CAR is not kept here.
    for (const name of readdirSync(cache).filter((name) => name.startsWith(id)))
      rmSync(path.join(cache, name));
    const seen: RestoreProgress[] = [];
    await engine.restore({
      bucket: 'Again',
      to: path.join(scratch, 'pulled'),
      overwrite: false,
      onProgress: (progress) => seen.push(progress),
    });
    const pulling = seen.filter((progress) => progress.phase === 'pulling');
    const restoring = seen.filter((progress) => progress.phase === 'restoring');
    expect(seen).toEqual([...pulling, ...restoring]);
    // Kept again once pulled: its size is what was fetched.
    const carBytes = statSync(path.join(cache, `${id}.car`)).size;
    expect(pulling.at(-1)).toEqual({
      phase: 'pulling',
      filesDone: 0,
      filesTotal: 0,
      bytesDone: carBytes,
      bytesTotal: carBytes,
      etaSeconds: 0,
    });
    expect(restoring.at(-1)).toMatchObject({ filesDone: 5, filesTotal: 5 });
  });

  it('restores one wanted file beside a different one, and leaves it when it is the same', async () => {
    const target = path.join(scratch, 'one-file');
    mkdirSync(target);
    writeFileSync(path.join(target, 'a.txt'), 'note A');
    const beside = await engine.restore({
      bucket: 'Again',
      path: 'notes/a.txt',
      to: target,
      overwrite: false,
    });
    expect(beside).toMatchObject({ files: 1, alreadyThere: 0, renamed: ['a (restored).txt'] });
    writeFileSync(path.join(target, 'a.txt'), 'note a');
    leavesAsked.blocksCar = 0;
    const same = await engine.restore({
      bucket: 'Again',
      path: 'notes/a.txt',
      to: target,
      overwrite: false,
    });
    expect(same).toMatchObject({ files: 0, alreadyThere: 1, renamed: [] });
    expect(leavesAsked.blocksCar).toBe(0);
  });

  it('finds again the copies it put beside names spelled alike, in another case or Unicode form', async () => {
    // One folder holding `café` twice, composed and decomposed, and `Report.txt` and
    // `report.txt`: names a disk that ignores case and normalization takes for one.
    const spellings = path.join(scratch, 'spellings');
    const names = ['caf\u00e9', 'cafe\u0301', 'Report.txt', 'report.txt'];
    mkdirSync(spellings);
    for (const name of names) writeFileSync(path.join(spellings, name), `the version's ${name}`);
    await engine.createBucket({ name: 'Spellings', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: spellings, bucket: 'Spellings' });
    // Each name taken: by a file of other words, or by a folder.
    const target = path.join(scratch, 'spellings-target');
    mkdirSync(target);
    writeFileSync(path.join(target, 'caf\u00e9'), "the user's words");
    mkdirSync(path.join(target, 'cafe\u0301'));
    writeFileSync(path.join(target, 'Report.txt'), "the user's report");
    mkdirSync(path.join(target, 'report.txt'));
    const first = await engine.restore({ bucket: 'Spellings', to: target, overwrite: false });
    expect(first).toMatchObject({ files: 4, alreadyThere: 0 });
    // Each copy under a name no other copy takes on such a disk either.
    const folded = first.renamed.map((copy) => copy.normalize('NFC').toLowerCase());
    expect(new Set(folded).size).toBe(4);
    const restored = entriesBelow(target);

    leavesAsked.blocksCar = 0;
    const again = await engine.restore({ bucket: 'Spellings', to: target, overwrite: false });
    expect(again).toMatchObject({ files: 0, alreadyThere: 0, renamed: [] });
    expect(again.restoredBefore.map((copy) => copy.as).sort()).toEqual([...first.renamed].sort());
    expect(leavesAsked.blocksCar).toBe(0);
    expect(entriesBelow(target)).toEqual(restored);
  });

  it('fills again the folder it restored beside a file of its name, instead of making another', async () => {
    const target = path.join(scratch, 'folder-beside');
    mkdirSync(target);
    writeFileSync(path.join(target, 'notes'), 'a file where the version has a folder');
    const first = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(first).toMatchObject({ files: 5, renamed: ['notes (restored)'] });
    const whole = entriesBelow(target);

    leavesAsked.blocksCar = 0;
    const plan = await engine.planRestore({ bucket: 'Again', to: target, overwrite: false });
    expect(plan).toMatchObject({ files: 0, directories: 0, alreadyThere: 6, beside: ['notes'] });
    const again = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(again).toMatchObject({
      files: 0,
      directories: 0,
      alreadyThere: 6,
      renamed: ['notes (restored)'],
      restoredBefore: [],
    });
    expect(leavesAsked.blocksCar).toBe(0);
    expect(entriesBelow(target)).toEqual(whole);

    // What is missing from it is restored into it.
    unlinkSync(path.join(target, 'notes (restored)', 'b.txt'));
    const missing = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(missing).toMatchObject({ files: 1, alreadyThere: 5, renamed: ['notes (restored)'] });
    expect(entriesBelow(target)).toEqual(whole);
    expect(readFileSync(path.join(target, 'notes (restored)', 'b.txt'), 'utf8')).toBe('note b');
    expect(readFileSync(path.join(target, 'notes'), 'utf8')).toBe(
      'a file where the version has a folder',
    );
  });

  it('restores a link beside a folder that took its name, and writes every file again when asked to overwrite', async () => {
    const target = path.join(scratch, 'unreadable');
    await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    // A folder where the link was: it cannot be that link, whatever it holds.
    unlinkSync(path.join(target, 'link'));
    mkdirSync(path.join(target, 'link'));
    const again = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(again).toMatchObject({ files: 0, symlinks: 1, alreadyThere: 5 });
    expect(again.renamed).toEqual(['link (restored)']);
    // The link it put beside the folder is the version's: left, not made again.
    const third = await engine.restore({ bucket: 'Again', to: target, overwrite: false });
    expect(third).toMatchObject({
      symlinks: 0,
      alreadyThere: 5,
      renamed: [],
      restoredBefore: [{ path: 'link', as: 'link (restored)' }],
    });

    // --overwrite writes every file again, as it always did.
    const replaced = await engine.restore({ bucket: 'Again', to: target, overwrite: true });
    expect(replaced).toMatchObject({ files: 5, alreadyThere: 0 });
  });
});

describe('a restore to where the files came from', () => {
  it('brings back what was deleted, keeps what was edited beside a copy, and leaves the rest', async () => {
    const folder = path.join(scratch, 'documents');
    mkdirSync(path.join(folder, 'letters'), { recursive: true });
    writeFileSync(path.join(folder, 'letters', 'may.txt'), 'dear ann');
    writeFileSync(path.join(folder, 'letters', 'june.txt'), 'dear bob');
    writeFileSync(path.join(folder, 'plan.txt'), 'the plan');
    await engine.createBucket({ name: 'Documents', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: folder, bucket: 'Documents' });

    rmSync(path.join(folder, 'letters', 'may.txt'));
    writeFileSync(path.join(folder, 'plan.txt'), 'the new plan');
    const one = await engine.restore({
      bucket: 'Documents',
      path: 'letters/may.txt',
      overwrite: false,
    });
    expect(one).toMatchObject({
      files: 1,
      restoredInto: path.join(folder, 'letters'),
      backedUpFrom: null,
    });
    expect(readFileSync(path.join(folder, 'letters', 'may.txt'), 'utf8')).toBe('dear ann');

    rmSync(path.join(folder, 'letters'), { recursive: true });
    const all = await engine.restore({ bucket: 'Documents', overwrite: false });
    expect(all).toMatchObject({
      files: 3,
      alreadyThere: 0,
      renamed: ['plan (restored).txt'],
      restoredInto: folder,
    });
    expect(entriesBelow(folder)).toEqual([
      'letters',
      'letters/june.txt',
      'letters/may.txt',
      'plan (restored).txt',
      'plan.txt',
    ]);
    expect(readFileSync(path.join(folder, 'plan.txt'), 'utf8')).toBe('the new plan');
    expect(readFileSync(path.join(folder, 'plan (restored).txt'), 'utf8')).toBe('the plan');
    // The copy beside the edited file is the user's to keep, and is backed up with the rest.
    const next = await engine.backup({ dir: folder, bucket: 'Documents' });
    expect(next).toMatchObject({ files: 4, skipped: [] });

    // The folder gone, as on a disk not connected: nothing is made in its place.
    renameSync(folder, `${folder}-away`);
    await expect(engine.restore({ bucket: 'Documents', overwrite: false })).rejects.toMatchObject({
      code: 'not_found',
      message: `${folder}, where this version was backed up from, is not there: if it is on a disk, connect it; to restore it anyway, name it with --to ${folder}`,
    });
    expect(existsSync(folder)).toBe(false);
  });
});

describe('a restore beside a file whose name is near the longest a disk takes', () => {
  it("shortens the copy's name before its extension, names the file it kept in full, and finds the copy when run again", async () => {
    const folder = path.join(scratch, 'long-names');
    mkdirSync(folder);
    // 254 bytes each: one of ASCII, one of two-byte characters, one whose extension is long.
    const names = [
      `${'n'.repeat(250)}.txt`,
      `${'é'.repeat(125)}.jpg`,
      `${'x'.repeat(100)}.${'e'.repeat(153)}`,
    ];
    for (const name of names) writeSettled(path.join(folder, name), `backed up ${name.length}`);
    await engine.createBucket({ name: 'Long', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: folder, bucket: 'Long' });
    for (const name of names) writeFileSync(path.join(folder, name), 'edited since');

    const restored = await engine.restore({ bucket: 'Long', overwrite: false });
    expect(restored).toMatchObject({ files: 3, notRestored: [] });
    const copies = entriesBelow(folder).filter((name) => !names.includes(name));
    expect(copies).toEqual([
      `${'n'.repeat(240)} (restored).txt`,
      `${'x'.repeat(100)}.${'e'.repeat(153)}`.slice(0, 244) + ' (restored)',
      `${'é'.repeat(120)} (restored).jpg`,
    ]);
    for (const copy of copies) expect(Buffer.byteLength(copy)).toBeLessThanOrEqual(255);
    expect([...restored.restoredBeside].sort((a, b) => (a.path < b.path ? -1 : 1))).toEqual(
      names
        .map((name, at) => ({ path: name, as: copies[[0, 2, 1][at] ?? 0] }))
        .sort((a, b) => (a.path < b.path ? -1 : 1)),
    );
    expect(readFileSync(path.join(folder, copies[0] ?? ''), 'utf8')).toBe('backed up 254');

    const again = await runCanopy(home, ['restore', '--bucket', 'Long', '--dry-run'], {
      CANOPY_SECRET_STORE: 'file',
    });
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toContain(
      `${names[0]} was restored before as ${copies[0]}, with the same content, and would be left as it is\n`,
    );
    expect(again.stdout).toContain('would write 0 files (0 B)');
  });
});

describe('a restore of a named version', () => {
  it('refuses a version not of the bucket, and one whose data is not all stored yet', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    await expect(
      engine.restore({ bucket: 'Again', version: unknown, to: scratch, overwrite: false }),
    ).rejects.toMatchObject({
      code: 'not_found',
      message: `bucket "Again" has no version ${unknown} (canopy versions lists them)`,
    });
    // A mistyped snapshot is named back, in a UUID's shape or not.
    for (const snapshot of [unknown, 'last-week']) {
      await expect(
        engine.restore({ bucket: 'Again', snapshot, to: scratch, overwrite: false }),
      ).rejects.toMatchObject({
        code: 'not_found',
        message: `bucket "Again" has no snapshot ${snapshot} (canopy snapshots lists them)`,
      });
      await expect(engine.ls({ bucket: 'Again', snapshot })).rejects.toMatchObject({
        code: 'not_found',
        message: `bucket "Again" has no snapshot ${snapshot} (canopy snapshots lists them)`,
      });
    }
    // Both named: which was meant is not guessed, even for a version in the local cache.
    const [snapshot] = await engine.listSnapshots({ bucket: 'Again' });
    const [active] = await engine.listVersions({ bucket: 'Again' });
    const both = { bucket: 'Again', version: active?.id ?? '', snapshot: snapshot?.id ?? '' };
    expect(snapshot).toBeDefined();
    await expect(engine.ls(both)).rejects.toMatchObject({
      code: 'usage',
      message: 'name a version or a snapshot, not both',
    });
    await expect(engine.restore({ ...both, to: scratch, overwrite: false })).rejects.toMatchObject({
      code: 'usage',
    });
    const otherFolder = path.join(scratch, 'other');
    mkdirSync(otherFolder);
    writeFileSync(path.join(otherFolder, 'other.txt'), 'another bucket');
    await engine.createBucket({ name: 'Other', type: 'backup', storageClass: 'hot' });
    const ofOther = await engine.backup({ dir: otherFolder, bucket: 'Other' });
    await expect(
      engine.restore({
        bucket: 'Again',
        version: ofOther.versionId,
        to: path.join(scratch, 'not-made'),
        overwrite: false,
      }),
    ).rejects.toMatchObject({ code: 'not_found' });

    // A backup stopped once its version was pushed, before any of its data was stored.
    const folder = path.join(scratch, 'half');
    mkdirSync(folder);
    writeFileSync(path.join(folder, 'big.bin'), randomBytes(2 * MiB));
    const halfHome = path.join(scratch, 'half-home');
    const stopping = createEngine({
      home: halfHome,
      secrets: new FileSecretStore(halfHome),
      startLocalService,
      afterShardConfirmed: (confirmed) => {
        if (confirmed === 0) throw new Error('stopped before the first shard');
      },
    });
    try {
      await stopping.loginLocal({ dataDir: path.join(scratch, 'half-data') });
      await stopping.createBucket({ name: 'Half', type: 'backup', storageClass: 'hot' });
      await expect(stopping.backup({ dir: folder, bucket: 'Half' })).rejects.toThrow(
        'stopped before the first shard',
      );
      const [pending] = await stopping.listVersions({ bucket: 'Half' });
      expect(pending?.state).toBe('pending');
      const id = pending?.id ?? '';
      const to = path.join(scratch, 'half-restored');
      await expect(
        stopping.restore({ bucket: 'Half', version: id, to, overwrite: false }),
      ).rejects.toMatchObject({
        code: 'conflict',
        message: `version ${id} is still being uploaded, so not all of its data is stored: run the backup again to finish it, or name a version stored whole`,
      });
      await expect(
        stopping.verify({ bucket: 'Half', version: id, all: true }),
      ).rejects.toMatchObject({ code: 'conflict' });
      expect(existsSync(to)).toBe(false);
      // Its tree can be browsed all the same.
      const entries = await stopping.ls({ bucket: 'Half', version: id });
      expect(entries.map((entry) => entry.name)).toEqual(['big.bin']);
    } finally {
      await stopping.close();
    }
  });
});

describe('canopy restore run again', () => {
  it('says how many files were there already, and where it restored to when no folder was named', async () => {
    const cliHome = path.join(scratch, 'cli-home');
    await loginWithBucket(cliHome, path.join(scratch, 'cli-local'), 'Words');
    const env = { CANOPY_SECRET_STORE: 'file' };
    const backup = await runCanopy(
      cliHome,
      ['backup', source, '--bucket', 'Words', '--progress'],
      env,
    );
    expect(backup.status, backup.stderr).toBe(0);
    // Off a terminal, --progress prints a line now and then, and each phase's last.
    expect(backup.stderr).toMatch(/^reading: 5\/5 files, 3\.1 MB of 3\.1 MB, almost done$/m);
    // A scan's last count is printed once reading starts, however soon after the one before.
    expect(backup.stderr).toMatch(/^scanning: 5 files, 3\.1 MB found\nreading: /m);
    expect(backup.stderr).toMatch(/^sending the list of files: (.+) of \1, almost done$/m);
    const verified = await runCanopy(
      cliHome,
      ['verify', '--bucket', 'Words', '--all', '--progress'],
      env,
    );
    expect(verified.status, verified.stderr).toBe(0);
    expect(verified.stderr.trimEnd().split('\n').at(-1)).toBe(
      'verifying: 7/7 blocks, 3.1 MB of 3.1 MB, almost done',
    );
    expect(verified.stderr).toMatch(/^fetching the list of files: (.+) of \1, almost done$/m);
    const target = path.join(scratch, 'cli-target');
    const first = await runCanopy(
      cliHome,
      ['restore', '--bucket', 'Words', '--to', target, '--progress'],
      env,
    );
    expect(first.status, first.stderr).toBe(0);
    expect(first.stderr.trimEnd().split('\n').at(-1)).toBe(
      'restoring: 5/5 files, 3.1 MB of 3.1 MB, almost done',
    );
    expect(first.stdout).not.toContain('there already');
    const again = await runCanopy(cliHome, ['restore', '--bucket', 'Words', '--to', target], env);
    expect(again.status, again.stderr).toBe(0);
    // Its folders were there too, and are left as they were: none is told as restored.
    expect(again.stdout).toBe(
      'restored 0 files (0 B), 0 folders, 0 symlinks\n' +
        'already there with the same content, and left as they were: 6 files and links\n',
    );
    // --sparse restores the same files (none of these has a chunk of zeros to leave out).
    const sparse = await runCanopy(
      cliHome,
      ['restore', '--bucket', 'Words', '--to', path.join(scratch, 'cli-sparse'), '--sparse'],
      env,
    );
    expect(sparse.stdout).toBe(first.stdout);
    const one = await runCanopy(
      cliHome,
      ['restore', '--bucket', 'Words', 'notes/a.txt', '--to', path.join(target, 'notes')],
      env,
    );
    expect(one.stdout).toBe(
      'restored 0 files (0 B), 0 folders, 0 symlinks\n' +
        'already there with the same content, and left as it was: 1 file or link\n',
    );
    // Without --to, to the folder backed up: everything is there.
    const home = await runCanopy(cliHome, ['restore', '--bucket', 'Words'], env);
    expect(home.status, home.stderr).toBe(0);
    expect(home.stdout).toBe(
      `into ${source}, where it was backed up from\n` +
        'restored 0 files (0 B), 0 folders, 0 symlinks\n' +
        'already there with the same content, and left as they were: 6 files and links\n',
    );
  });
});

describe('a path in a version, as a user types it', () => {
  it('may be the absolute path the file had, or hold . and .., and none leads above the top; -R lists all below it', async () => {
    const cliHome = path.join(scratch, 'paths-home');
    await loginWithBucket(cliHome, path.join(scratch, 'paths-local'), 'Paths');
    const env = { CANOPY_SECRET_STORE: 'file' };
    const backup = await runCanopy(cliHome, ['backup', source, '--bucket', 'Paths'], env);
    expect(backup.status, backup.stderr).toBe(0);

    // As the shell completes it: the absolute path of a folder backed up, and of the folder itself.
    const listed = await runCanopy(
      cliHome,
      ['ls', '--bucket', 'Paths', path.join(source, 'notes') + '/'],
      env,
    );
    expect(listed.status, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/ a\.txt\n.* b\.txt\n$/);
    // With -R, everything below it, each by its path.
    const top = await runCanopy(cliHome, ['ls', '--bucket', 'Paths', '-R', source], env);
    expect(top.status, top.stderr).toBe(0);
    expect(
      top.stdout
        .trimEnd()
        .split('\n')
        .map((line) => line.split('  ').at(-1)),
    ).toEqual([
      'empty',
      'large.bin',
      'link -> notes/a.txt',
      'notes',
      'notes/a.txt',
      'notes/b.txt',
      'same-size.txt',
    ]);
    const dotted = await runCanopy(cliHome, ['ls', '--bucket', 'Paths', './notes/../notes'], env);
    expect(dotted.stdout).toBe(listed.stdout);

    const target = path.join(scratch, 'paths-target');
    const one = await runCanopy(
      cliHome,
      ['restore', '--bucket', 'Paths', path.join(source, 'notes', 'b.txt'), '--to', target],
      env,
    );
    expect(one.status, one.stderr).toBe(0);
    expect(entriesBelow(target)).toEqual(['b.txt']);
    expect(readFileSync(path.join(target, 'b.txt'), 'utf8')).toBe('note b');

    const refused = await runCanopy(
      cliHome,
      ['restore', '--bucket', 'Paths', 'notes/../../etc', '--to', target],
      env,
    );
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(
      'canopy: notes/../../etc leads above the top of this version (canopy ls shows what it holds)\n',
    );
    expect(entriesBelow(target)).toEqual(['b.txt']);
  });

  it('is, typed relative in a folder, what it names there when that lies in the folder backed up', async () => {
    const cliHome = path.join(scratch, 'typed-home');
    await loginWithBucket(cliHome, path.join(scratch, 'typed-local'), 'Typed');
    const env = { CANOPY_SECRET_STORE: 'file' };
    const pictures = path.join(scratch, 'typed', 'Pictures');
    mkdirSync(path.join(pictures, '2019'), { recursive: true });
    writeFileSync(path.join(pictures, '2019', 'beach.jpg'), 'a beach');
    writeFileSync(path.join(pictures, 'list.txt'), 'photos');
    const backup = await runCanopy(cliHome, ['backup', pictures, '--bucket', 'Typed'], env);
    expect(backup.status, backup.stderr).toBe(0);
    const canopyIn = (cwd: string, ...args: string[]) => runCanopyIn(cwd, cliHome, args, env);

    // Deleted by mistake, and restored by the name the shell shows in its folder.
    rmSync(path.join(pictures, '2019', 'beach.jpg'));
    const restored = await canopyIn(
      path.join(pictures, '2019'),
      'restore',
      'beach.jpg',
      '--bucket',
      'Typed',
    );
    expect(restored.status, restored.stderr).toBe(0);
    expect(readFileSync(path.join(pictures, '2019', 'beach.jpg'), 'utf8')).toBe('a beach');
    // From the folder above the one backed up, and from that folder itself.
    const history = await canopyIn(
      path.join(scratch, 'typed'),
      'history',
      'Pictures/2019/beach.jpg',
      '--bucket',
      'Typed',
    );
    expect(history.status, history.stderr).toBe(0);
    expect(history.stdout).toMatch(/^Pictures\/2019\/beach\.jpg in bucket "Typed": 1 change/);
    const listed = await canopyIn(pictures, 'ls', '2019', '--bucket', 'Typed');
    expect(listed.stdout).toMatch(/ beach\.jpg\n$/);
    // Typed in a folder the bucket does not back up, it goes from the version's top, as ever.
    const elsewhere = await canopyIn(os.tmpdir(), 'ls', '2019', '--bucket', 'Typed');
    expect(elsewhere.stdout).toBe(listed.stdout);
    const inSubfolder = await canopyIn(path.join(pictures, '2019'), 'ls', '.', '--bucket', 'Typed');
    expect(inSubfolder.stdout).toBe(listed.stdout);
  });
});
