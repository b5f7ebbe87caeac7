import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type ComparedVersions, type Engine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { canopyFails, canopySucceeds, loginWithBucket } from '../helpers/canopy-cli.ts';
import { firstBackup } from '../helpers/first-backup.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';
import { damageNodeOf } from '../helpers/damaged-node.ts';

// `canopy diff`: what changed from one version of a bucket to another, told from the two
// versions' trees: each entry added, removed, with other bytes, with only another mode or time,
// or of another type; a folder's contents with it when it came or went.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-version-diff-'));
const source = path.join(scratch, 'source');
const MiB = 1024 * 1024;
/** Enough entries for the folder to be a HAMT (§17.1), whose links are not in name order. */
const MANY = 6000;
let engine: Engine;
let first: string;
let second: string;

/** Each change as `<change> <path>`, in the order told. */
function lines(compared: ComparedVersions): string[] {
  return compared.changes.map((change) => `${change.change} ${change.path}`);
}

beforeAll(async () => {
  mkdirSync(path.join(source, 'docs', 'old'), { recursive: true });
  mkdirSync(path.join(source, 'many'), { recursive: true });
  writeFileSync(path.join(source, 'docs', 'letter.txt'), 'Dear Ann');
  writeFileSync(path.join(source, 'docs', 'same.txt'), 'left alone');
  writeFileSync(path.join(source, 'docs', 'old', 'a.txt'), 'a');
  writeFileSync(path.join(source, 'docs', 'old', 'b.txt'), 'b');
  writeFileSync(path.join(source, 'large.bin'), randomBytes(3 * MiB));
  writeFileSync(path.join(source, 'script.sh'), 'echo hi\n', { mode: 0o644 });
  writeFileSync(path.join(source, 'touched.txt'), 'same words');
  writeFileSync(path.join(source, 'becomes-folder'), 'a file for now');
  symlinkSync('docs/letter.txt', path.join(source, 'link'));
  for (let i = 0; i < MANY; i += 1)
    writeFileSync(path.join(source, 'many', `entry-${String(i).padStart(5, '0')}.txt`), `${i}`);
  engine = createEngine({
    home: path.join(scratch, 'home'),
    secrets: new FileSecretStore(path.join(scratch, 'home')),
    startLocalService,
  });
  first = (await firstBackup(engine, source, 'Diffs')).versionId;

  writeFileSync(path.join(source, 'docs', 'letter.txt'), 'Dear Bob'); // same size, other bytes
  rmSync(path.join(source, 'docs', 'old'), { recursive: true });
  mkdirSync(path.join(source, 'docs', 'new', 'deeper'), { recursive: true });
  writeFileSync(path.join(source, 'docs', 'new', 'deeper', 'c.txt'), 'c');
  const large = readFileSync(path.join(source, 'large.bin'));
  large[2 * MiB + 7] = (large[2 * MiB + 7] ?? 0) ^ 0xff; // one byte of its third chunk
  writeFileSync(path.join(source, 'large.bin'), large);
  chmodSync(path.join(source, 'script.sh'), 0o755);
  const later = new Date('2030-01-01T00:00:00Z');
  utimesSync(path.join(source, 'touched.txt'), later, later);
  unlinkSync(path.join(source, 'becomes-folder'));
  mkdirSync(path.join(source, 'becomes-folder'));
  writeFileSync(path.join(source, 'becomes-folder', 'inside.txt'), 'now a folder');
  unlinkSync(path.join(source, 'link'));
  symlinkSync('docs/same.txt', path.join(source, 'link'));
  writeFileSync(path.join(source, 'many', 'entry-00017.txt'), 'changed');
  unlinkSync(path.join(source, 'many', 'entry-04000.txt'));
  writeFileSync(path.join(source, 'many', 'entry-99999.txt'), 'added');
  writeFileSync(path.join(source, 'many', 'aaa-first.txt'), 'added');
  second = (await engine.backup({ dir: source, bucket: 'Diffs' })).versionId;
}, 120_000);

afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('comparing two versions', () => {
  it('tells each entry added, removed, modified, with only its mode or time changed, or of another type', async () => {
    const compared = await engine.compare({ bucket: 'Diffs' });
    expect(compared.from.id).toBe(first);
    expect(compared.to.id).toBe(second);
    expect(lines(compared)).toEqual([
      'type becomes-folder',
      'added becomes-folder/inside.txt',
      'modified docs/letter.txt',
      'added docs/new',
      'added docs/new/deeper',
      'added docs/new/deeper/c.txt',
      'removed docs/old',
      'removed docs/old/a.txt',
      'removed docs/old/b.txt',
      'modified large.bin',
      'modified link',
      'added many/aaa-first.txt',
      'modified many/entry-00017.txt',
      'removed many/entry-04000.txt',
      'added many/entry-99999.txt',
      'metadata script.sh',
      'metadata touched.txt',
    ]);
    const byPath = new Map(compared.changes.map((change) => [change.path, change]));
    expect(byPath.get('becomes-folder')).toMatchObject({
      before: { type: 'file', size: 14 },
      after: { type: 'directory' },
    });
    expect(byPath.get('script.sh')).toMatchObject({
      before: { mode: 0o644 },
      after: { mode: 0o755 },
    });
    expect(byPath.get('touched.txt')?.after?.mtime).toBe(Date.parse('2030-01-01') / 1000);
    expect(byPath.get('link')).toMatchObject({
      before: { target: 'docs/letter.txt' },
      after: { target: 'docs/same.txt' },
    });
    expect(byPath.get('docs/old/a.txt')).toMatchObject({ before: { size: 1 }, after: null });
  });

  it('hands the changes over as found, a part at a time, when asked to, and counts them either way', async () => {
    const held = await engine.compare({ bucket: 'Diffs' });
    const told: string[] = [];
    let versionsTold = 0;
    const handed = await engine.compare({
      bucket: 'Diffs',
      onChanges: {
        versions(compared) {
          // Before any change.
          expect(told).toEqual([]);
          expect(compared).toMatchObject({ from: { id: first }, to: { id: second } });
          versionsTold += 1;
        },
        changes(changes) {
          told.push(...changes.map((change) => `${change.change} ${change.path}`));
        },
      },
    });
    expect(versionsTold).toBe(1);
    expect(told).toEqual(lines(held));
    expect(handed.changes).toEqual([]);
    expect(handed.counts).toEqual(held.counts);
    // The bytes of letter.txt (8), large.bin (3 MiB), inside.txt (12), c.txt (1), and of
    // aaa-first.txt, entry-00017.txt and entry-99999.txt (5, 7 and 5).
    expect(held.counts).toEqual({
      added: 6,
      removed: 4,
      modified: 4,
      metadata: 2,
      type: 1,
      fileBytesAddedOrModified: 8 + 3 * MiB + 12 + 1 + 5 + 7 + 5,
    });
  });

  it('hands over each change once when a kept version turns out damaged part way and is pulled again', async () => {
    const tree = path.join(scratch, 'damaged-source');
    mkdirSync(path.join(tree, 'a'), { recursive: true });
    // More changes than are handed over at once come before the damaged node is read.
    const names = Array.from({ length: 1500 }, (_, i) => `a/${String(i).padStart(4, '0')}.txt`);
    for (const name of names) writeFileSync(path.join(tree, name), 'before');
    writeFileSync(path.join(tree, 'z.txt'), 'before');
    await engine.createBucket({ name: 'Damaged', type: 'backup', storageClass: 'hot' });
    await engine.backup({ dir: tree, bucket: 'Damaged' });
    for (const name of [...names, 'z.txt']) writeFileSync(path.join(tree, name), 'after!');
    const newer = (await engine.backup({ dir: tree, bucket: 'Damaged' })).versionId;
    const held = await engine.compare({ bucket: 'Damaged' });
    expect(lines(held)).toEqual([...names, 'z.txt'].map((name) => `modified ${name}`));

    // One byte of z.txt's node flipped in the newer version's kept copy: the comparison reads it
    // last, once a thousand changes were handed over.
    const cached = path.join(scratch, 'home', 'metadata', `${newer}.car`);
    const whole = await damageNodeOf(cached, 'z.txt');

    const told: string[] = [];
    let versionsTold = 0;
    const handed = await engine.compare({
      bucket: 'Damaged',
      onChanges: {
        versions: () => (versionsTold += 1),
        changes: (changes) =>
          told.push(...changes.map((change) => `${change.change} ${change.path}`)),
      },
    });
    expect(versionsTold).toBe(1);
    expect(told).toEqual(lines(held));
    expect(handed.counts).toEqual(held.counts);
    // Pulled again whole, in place of the damaged copy.
    expect(readFileSync(cached).equals(whole)).toBe(true);
  });

  it('the other way round, tells what was added as removed and the rest alike', async () => {
    const back = await engine.compare({ bucket: 'Diffs', from: second, to: first });
    const swapped = lines(await engine.compare({ bucket: 'Diffs' })).map((line) =>
      line.replace(/^(added|removed)/, (kind) => (kind === 'added' ? 'removed' : 'added')),
    );
    expect([...lines(back)].sort()).toEqual([...swapped].sort());
  });

  it('compares only what lies at a path, named as `canopy ls` takes it', async () => {
    const docs = await engine.compare({ bucket: 'Diffs', path: 'docs/new' });
    expect(lines(docs)).toEqual([
      'added docs/new',
      'added docs/new/deeper',
      'added docs/new/deeper/c.txt',
    ]);
    const absolute = await engine.compare({ bucket: 'Diffs', path: path.join(source, 'many') });
    expect(lines(absolute)).toEqual([
      'added many/aaa-first.txt',
      'modified many/entry-00017.txt',
      'removed many/entry-04000.txt',
      'added many/entry-99999.txt',
    ]);
    const same = await engine.compare({ bucket: 'Diffs', path: 'docs/same.txt' });
    expect(same.changes).toEqual([]);
    await expect(engine.compare({ bucket: 'Diffs', path: 'nowhere' })).rejects.toMatchObject({
      code: 'not_found',
    });
  });
});

describe('canopy diff', () => {
  it('prints a line per change and a summary, and says when there is nothing to compare', async () => {
    const home = path.join(scratch, 'cli-home');
    const tree = path.join(scratch, 'cli-source');
    mkdirSync(path.join(tree, 'photos'), { recursive: true });
    writeFileSync(path.join(tree, 'photos', 'beach.jpg'), 'sand');
    writeFileSync(path.join(tree, 'notes.txt'), 'first');
    await loginWithBucket(home, path.join(scratch, 'cli-local'), 'Home');
    expect(await canopyFails(home, 'diff', '--bucket', 'Home')).toBe(
      'canopy: bucket "Home" has no version yet\n',
    );
    await canopySucceeds(home, 'backup', tree, '--bucket', 'Home', '--skip-check');
    const alone = await canopyFails(home, 'diff', '--bucket', 'Home');
    expect(alone).toMatch(
      /^canopy: version [0-9a-f-]{36} is the oldest of bucket "Home": there is none before it to compare it with \(--from names one\)\n$/,
    );

    writeFileSync(path.join(tree, 'notes.txt'), 'second, longer');
    mkdirSync(path.join(tree, 'photos', '2026\nnew line'));
    await canopySucceeds(home, 'backup', tree, '--bucket', 'Home', '--skip-check');
    const [older, newer] = (
      JSON.parse(await canopySucceeds(home, 'versions', '--bucket', 'Home', '--json')) as Array<{
        id: string;
      }>
    )
      .map((version) => version.id)
      .reverse();
    if (!older || !newer) throw new Error('two versions were made');
    const printed = (await canopySucceeds(home, 'diff', '--bucket', 'Home')).split('\n');
    expect(printed).toEqual([
      expect.stringMatching(
        new RegExp(
          `^from version ${older} \\(${TOLD_TIME}\\) to version ${newer} \\(${TOLD_TIME}\\)$`,
        ),
      ),
      'M notes.txt',
      '+ photos/2026\\nnew line/',
      '1 added, 0 removed, 1 modified; 14 B in files added or modified',
      '',
    ]);
    // Versions named by the start of their ids, either way round.
    const reversed = await canopySucceeds(
      home,
      'diff',
      '--bucket',
      'Home',
      '--from',
      newer.slice(0, 8),
      '--to',
      older.slice(0, 8),
      'photos',
    );
    expect(reversed.split('\n').slice(1)).toEqual([
      '- photos/2026\\nnew line/',
      '0 added, 1 removed, 0 modified; 0 B in files added or modified',
      '',
    ]);
    const itself = await canopySucceeds(home, 'diff', '--bucket', 'Home', '--from', newer);
    expect(itself.split('\n').slice(1)).toEqual(['no changes', '']);
    // For a script, one line of JSON: the versions, each change, and how many of each.
    const scripted = JSON.parse(
      await canopySucceeds(home, 'diff', '--bucket', 'Home', '--json'),
    ) as ComparedVersions;
    expect(scripted).toMatchObject({
      from: { id: older },
      to: { id: newer },
      offlineSince: null,
      counts: { added: 1, removed: 0, modified: 1, fileBytesAddedOrModified: 14 },
    });
    expect(scripted.changes.map((change) => [change.change, change.path])).toEqual([
      ['modified', 'notes.txt'],
      ['added', 'photos/2026\nnew line'],
    ]);
    expect(scripted.changes[0]).toMatchObject({ before: { size: 5 }, after: { size: 14 } });
    const none = JSON.parse(
      await canopySucceeds(home, 'diff', '--bucket', 'Home', '--from', newer, '--json'),
    ) as ComparedVersions;
    expect(none).toMatchObject({ changes: [], counts: { added: 0, removed: 0, modified: 0 } });
  });

  it('writes a long diff a part at a time, each change once, in order, as text and as JSON', async () => {
    const home = path.join(scratch, 'long-home');
    const tree = path.join(scratch, 'long-source');
    mkdirSync(path.join(tree, 'inbox'), { recursive: true });
    writeFileSync(path.join(tree, 'kept.txt'), 'kept');
    await loginWithBucket(home, path.join(scratch, 'long-local'), 'Long');
    await canopySucceeds(home, 'backup', tree, '--bucket', 'Long', '--skip-check');
    // More changes than the engine hands over at once (a thousand), and not a multiple of it.
    const added = Array.from({ length: 2345 }, (_, i) => `mail-${String(i).padStart(4, '0')}`);
    for (const name of added) writeFileSync(path.join(tree, 'inbox', name), name);
    await canopySucceeds(home, 'backup', tree, '--bucket', 'Long', '--skip-check');

    const text = (await canopySucceeds(home, 'diff', '--bucket', 'Long')).split('\n');
    expect(text.slice(1, -2)).toEqual(added.map((name) => `+ inbox/${name}`));
    expect(text.at(-2)).toBe(`2345 added, 0 removed, 0 modified; 21 kB in files added or modified`);
    const json = await canopySucceeds(home, 'diff', '--bucket', 'Long', '--json');
    expect(json.endsWith('}\n')).toBe(true);
    expect(json.split('\n')).toHaveLength(2);
    const scripted = JSON.parse(json) as ComparedVersions;
    expect(scripted.changes.map((change) => change.path)).toEqual(
      added.map((name) => `inbox/${name}`),
    );
    expect(scripted.counts).toMatchObject({ added: 2345, metadata: 0 });
  });

  it('tells no change between a version and the backup of its restore, to the nanosecond', async () => {
    const restored = path.join(scratch, 'restored');
    mkdirSync(path.join(restored, 'inner'), { recursive: true });
    writeFileSync(path.join(restored, 'plain.txt'), 'words');
    writeFileSync(path.join(restored, 'inner', 'edge.txt'), 'more words');
    symlinkSync('plain.txt', path.join(restored, 'link'));
    // Times to the nanosecond, as disks keep them; a restore can set them to the microsecond.
    const touch = (time: string, file: string): void => {
      execFileSync('touch', ['-h', '-d', `@${time}`, path.join(restored, file)]);
    };
    touch('1795000000.262641999', 'plain.txt');
    touch('1795000000.999999999', 'inner/edge.txt');
    touch('1700000000.000000777', 'link');
    await engine.createBucket({ name: 'Restored', type: 'backup', storageClass: 'hot' });
    const before = (await engine.backup({ dir: restored, bucket: 'Restored' })).versionId;
    // Restored onto a new computer's folder, backed up from then on: its times are those the
    // restore set. (Restored where it was backed up from, it backs up as the same version:
    // backup-after-restore.test.ts.)
    const moved = path.join(scratch, 'restored-elsewhere');
    await engine.restore({ bucket: 'Restored', to: moved, overwrite: false });
    const after = (await engine.backup({ dir: moved, bucket: 'Restored', replaceSource: true }))
      .versionId;
    expect(after).not.toBe(before);
    expect(lines(await engine.compare({ bucket: 'Restored', from: before, to: after }))).toEqual(
      [],
    );
    // A microsecond later is a change.
    execFileSync('touch', ['-h', '-d', '@1795000000.262643', path.join(moved, 'plain.txt')]);
    await engine.backup({ dir: moved, bucket: 'Restored' });
    expect(lines(await engine.compare({ bucket: 'Restored' }))).toEqual(['metadata plain.txt']);
  });
});
