import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import {
  createEngine,
  type BackupProgress,
  type Engine,
  type RestoreProgress,
  type VerifyProgress,
} from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { firstBackup } from '../helpers/first-backup.ts';
import { cachedFilesOf } from '../helpers/kept-state.ts';
import { damageNodeOf } from '../helpers/damaged-node.ts';
import { CACHE_TAG_NAME, isTaggedCache } from '../../main/scanner/index.ts';

// A version's metadata CAR is kept in the home's metadata cache, for browsing offline. One
// missing there is pulled into it (written to a staging file as it arrives, never held whole,
// then moved in); one damaged there (cut short) is pulled again and replaced, rather than make
// the version unreadable on this device. Browsing writes an index of the CAR's nodes beside it
// (`.car.nodes`), so later browsing reads only the nodes it needs; a node that no longer
// matches its CID (the CAR damaged on the disk since) has the version pulled again too.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-metadata-cache-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const cacheDir = path.join(home, 'metadata');
let engine: Engine;
let versionId: string;
let cached: string;
/** The cached CAR as the backup left it. */
let whole: Buffer;

beforeAll(async () => {
  mkdirSync(path.join(source, 'letters'), { recursive: true });
  for (let i = 0; i < 200; i += 1)
    writeFileSync(path.join(source, 'letters', `letter-${i}.txt`), `Dear reader, number ${i}`);
  writeFileSync(path.join(source, 'todo.txt'), 'water the plants');
  engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
  ({ versionId } = await firstBackup(engine, source, 'Cached'));
  cached = path.join(cacheDir, `${versionId}.car`);
  whole = readFileSync(cached);
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the metadata cache', () => {
  it('is tagged as a cache (CACHEDIR.TAG), which backup tools that honour tags leave out', async () => {
    expect(isTaggedCache(cacheDir)).toBe(true);
    const taggedHome = path.join(scratch, 'tagged-home');
    const tagged = createEngine({
      home: taggedHome,
      secrets: new FileSecretStore(taggedHome),
      startLocalService,
    });
    const tag = path.join(taggedHome, 'metadata', CACHE_TAG_NAME);
    const notes = path.join(scratch, 'tagged-source');
    mkdirSync(notes);
    writeFileSync(path.join(notes, 'todo.txt'), 'water the plants');
    try {
      await firstBackup(tagged, notes, 'Tagged');
      // A tag removed is written again with the next version kept; one there is left as it is.
      rmSync(tag);
      writeFileSync(path.join(notes, 'todo.txt'), 'water the plants today');
      await tagged.backup({ dir: notes, bucket: 'Tagged' });
      expect(isTaggedCache(path.dirname(tag))).toBe(true);
      const signatureAlone = 'Signature: 8a477f597d28d172789f06886806bc55';
      writeFileSync(tag, signatureAlone);
      writeFileSync(path.join(notes, 'todo.txt'), 'water the plants tomorrow');
      await tagged.backup({ dir: notes, bucket: 'Tagged' });
      expect(readFileSync(tag, 'utf8')).toBe(signatureAlone);
    } finally {
      await tagged.close();
    }
  });

  it('pulls a version it lacks for browsing, telling the fetch as it goes, and keeps it', async () => {
    rmSync(cached);
    const seen: RestoreProgress[] = [];
    const listed = await engine.ls({
      bucket: 'Cached',
      onProgress: (progress) => seen.push(progress),
    });
    expect(listed.map((entry) => entry.name)).toEqual(['letters', 'todo.txt']);
    expect(seen.at(-1)).toEqual({
      phase: 'pulling',
      filesDone: 0,
      filesTotal: 0,
      bytesDone: whole.length,
      bytesTotal: whole.length,
      etaSeconds: 0,
    });
    expect(readFileSync(cached).equals(whole)).toBe(true);
    // Kept, it is browsed without a fetch.
    seen.length = 0;
    await engine.ls({ bucket: 'Cached', onProgress: (progress) => seen.push(progress) });
    expect(seen).toEqual([]);
  });

  it('pulls a version it lacks, keeps it, and the restore reads it', async () => {
    rmSync(cached);
    const target = path.join(scratch, 'restored');
    const restored = await engine.restore({ bucket: 'Cached', to: target, overwrite: false });
    expect(restored).toMatchObject({ files: 201 });
    expect(readFileSync(path.join(target, 'letters', 'letter-7.txt'), 'utf8')).toBe(
      'Dear reader, number 7',
    );
    expect(readFileSync(cached).equals(whole)).toBe(true);
    expect(cachedFilesOf(home)).toEqual([`${versionId}.car`]);
    expect(readdirSync(path.join(home, 'staging'))).toEqual([]);
  });

  it("tells the read of a version's list of files as a phase of a restore and a verify, and a listing of it, once it takes long enough to be seen", async () => {
    // A clock that moves on 0.3 s at each read ('slow'), as for a tree of hundreds of thousands
    // of files, whose list takes seconds to read; or that stands still ('still'), as for a
    // list read at once, however busy the machine running the test.
    const slowHome = path.join(scratch, 'slow-home');
    let offset = 0;
    let clock: 'real' | 'still' | 'slow' = 'real';
    let stoodAt = 0;
    const slowEngine = createEngine({
      home: slowHome,
      secrets: new FileSecretStore(slowHome),
      startLocalService,
      clock: () => {
        if (clock === 'still') return stoodAt;
        if (clock === 'slow') offset += 300;
        return Date.now() + offset;
      },
    });
    try {
      const { versionId: slowVersion } = await firstBackup(slowEngine, source, 'Slow');
      const carBytes = readFileSync(path.join(slowHome, 'metadata', `${slowVersion}.car`)).length;
      const restoreWith = async (into: string): Promise<RestoreProgress[]> => {
        const seen: RestoreProgress[] = [];
        await slowEngine.restore({
          bucket: 'Slow',
          to: path.join(scratch, into),
          overwrite: false,
          onProgress: (progress) => seen.push(progress),
        });
        return seen;
      };
      const phasesOf = (seen: RestoreProgress[]): string[] =>
        seen.map((progress) => progress.phase).filter((phase, at, all) => phase !== all[at - 1]);
      // Read at once, it is not told.
      stoodAt = Date.now();
      clock = 'still';
      const quick = await restoreWith('quick');
      clock = 'real';
      expect(phasesOf(quick)).toEqual(['restoring']);
      clock = 'slow';
      const seen = await restoreWith('slow');
      clock = 'real';
      expect(phasesOf(seen)).toEqual(['opening', 'restoring']);
      expect(seen.filter((progress) => progress.phase === 'opening').at(-1)).toEqual({
        phase: 'opening',
        filesDone: 0,
        filesTotal: 0,
        bytesDone: carBytes,
        bytesTotal: carBytes,
        etaSeconds: 0,
      });
      // A verify reads the list it fetched afresh the same way.
      const verifying: VerifyProgress[] = [];
      clock = 'slow';
      await slowEngine.verify({
        bucket: 'Slow',
        all: true,
        onProgress: (progress) => verifying.push(progress),
      });
      clock = 'real';
      expect(
        verifying
          .map((progress) => progress.phase)
          .filter((phase, at, all) => phase !== all[at - 1]),
      ).toEqual(['pulling', 'opening', 'verifying']);
      expect(verifying.filter((progress) => progress.phase === 'opening').at(-1)).toMatchObject({
        bytesDone: carBytes,
        bytesTotal: carBytes,
      });
      // A listing of everything below a folder is told as it goes, once it takes that long.
      const listWith = async (): Promise<{ seen: RestoreProgress[]; entries: number }> => {
        const seen: RestoreProgress[] = [];
        const { entries } = await slowEngine.browse({
          bucket: 'Slow',
          recursive: true,
          onProgress: (progress) => seen.push(progress),
        });
        return { seen, entries: entries.length };
      };
      stoodAt = Date.now();
      clock = 'still';
      const listedAtOnce = await listWith();
      clock = 'slow';
      const listedSlowly = await listWith();
      clock = 'real';
      expect(listedAtOnce.seen).toEqual([]);
      expect(phasesOf(listedSlowly.seen)).toEqual(['listing']);
      expect(listedSlowly.seen.at(-1)).toEqual({
        phase: 'listing',
        filesDone: listedSlowly.entries,
        filesTotal: listedSlowly.entries,
        bytesDone: 0,
        bytesTotal: 0,
        etaSeconds: 0,
      });
      expect(listedSlowly.entries).toBeGreaterThan(200);
    } finally {
      await slowEngine.close();
    }
  });

  it('pulls again, and replaces, a cached version cut short', async () => {
    truncateSync(cached, Math.floor(whole.length / 2));
    const listed = await engine.ls({ bucket: 'Cached' });
    expect(listed.map((entry) => entry.name)).toEqual(['letters', 'todo.txt']);
    expect(readFileSync(cached).equals(whole)).toBe(true);
    expect(cachedFilesOf(home)).toEqual([`${versionId}.car`, `${versionId}.car.nodes`]);
    expect(readdirSync(path.join(home, 'staging'))).toEqual([]);
  });

  it('pulls again, and replaces, a cached version whose node was damaged after it was indexed', async () => {
    await engine.ls({ bucket: 'Cached' });
    expect(readdirSync(cacheDir)).toContain(`${versionId}.car.nodes`);
    // One byte of the root folder's node flipped: the CAR keeps its length, so its index
    // still fits it, and the tree opens without the CAR being read whole.
    await damageNodeOf(cached);

    const listed = await engine.ls({ bucket: 'Cached' });
    expect(listed.map((entry) => entry.name)).toEqual(['letters', 'todo.txt']);
    expect(readFileSync(cached).equals(whole)).toBe(true);
    expect(readdirSync(path.join(home, 'staging'))).toEqual([]);
  });

  it('keeps within its budget, dropping the versions used longest ago but never an active one', async () => {
    // A budget smaller than any CAR: only the versions kept whatever their size stay.
    const smallHome = path.join(scratch, 'small-home');
    const small = createEngine({
      home: smallHome,
      secrets: new FileSecretStore(smallHome),
      startLocalService,
      metadataCacheBytes: 1,
    });
    const smallCache = path.join(smallHome, 'metadata');
    const cars = () => cachedFilesOf(smallHome);
    try {
      const first = await firstBackup(small, source, 'Small');
      writeFileSync(path.join(source, 'todo.txt'), 'water the plants twice');
      const second = await small.backup({ dir: source, bucket: 'Small' });
      // The version before is no longer active: it goes once the new one is cached, with the
      // index of its nodes the backup wrote beside it.
      expect(cars()).toEqual([`${second.versionId}.car`, `${second.versionId}.car.nodes`]);
      // Asked for again, it is pulled, and kept while it is the one just used.
      const old = await small.ls({ bucket: 'Small', version: first.versionId });
      expect(old.find((entry) => entry.name === 'todo.txt')?.size).toBe('water the plants'.length);
      // Pulled, then browsed, it has the index of its nodes beside it.
      expect(cars()).toEqual(
        [
          `${first.versionId}.car`,
          `${first.versionId}.car.nodes`,
          `${second.versionId}.car`,
          `${second.versionId}.car.nodes`,
        ].sort(),
      );
      writeFileSync(path.join(source, 'todo.txt'), 'water the plants, thrice');
      const third = await small.backup({ dir: source, bucket: 'Small' });
      expect(cars()).toEqual([`${third.versionId}.car`, `${third.versionId}.car.nodes`]);
      // Trimming leaves the tag, which is no CAR.
      expect(isTaggedCache(smallCache)).toBe(true);
      // The active version's tree is still there to build on: the next backup reads nothing
      // it need not, and browsing it needs no pull.
      const fourth = await small.backup({ dir: source, bucket: 'Small' });
      expect(fourth).toMatchObject({ unchanged: true, versionId: third.versionId });
      expect((await small.ls({ bucket: 'Small' })).map((entry) => entry.name)).toEqual([
        'letters',
        'todo.txt',
      ]);
    } finally {
      await small.close();
      writeFileSync(path.join(source, 'todo.txt'), 'water the plants');
    }
  });

  it("removes what a killed run's pull or backup left in staging, and not a running one's", async () => {
    const staging = path.join(home, 'staging');
    // A process that has ended, and one still running (this test's parent).
    const deadPid = spawnSync('true').pid;
    const left = `${deadPid}-${randomUUID()}`;
    const running = `${process.ppid}-${randomUUID()}`;
    // Each a metadata CAR, and the index of its nodes a backup writes beside it.
    for (const name of [left, running]) {
      writeFileSync(path.join(staging, name), whole.subarray(0, 1000));
      writeFileSync(path.join(staging, `${name}.nodes`), whole.subarray(0, 100));
    }
    rmSync(cached);
    const listed = await engine.ls({ bucket: 'Cached' });
    expect(listed.map((entry) => entry.name)).toEqual(['letters', 'todo.txt']);
    expect(readdirSync(staging).sort()).toEqual([running, `${running}.nodes`]);
    for (const name of readdirSync(staging)) rmSync(path.join(staging, name));
  });

  it('shows the pull of the version a backup builds on, when it lacks it, as a phase of its own', async () => {
    const [active] = await engine.listVersions({ bucket: 'Cached' });
    const activeCar = path.join(cacheDir, `${active?.id ?? ''}.car`);
    const size = readFileSync(activeCar).length;
    rmSync(activeCar);
    writeFileSync(path.join(source, 'todo.txt'), 'water the plants, and the lawn');
    const seen: BackupProgress[] = [];
    await engine.backup({
      dir: source,
      bucket: 'Cached',
      onProgress: (progress) => seen.push(progress),
    });
    const phases = seen
      .map((progress) => progress.phase)
      .filter((phase, at, all) => phase !== all[at - 1]);
    expect(phases).toEqual(['scanning', 'pulling', 'reading', 'pushing', 'uploading']);
    expect(seen.filter((progress) => progress.phase === 'pulling').at(-1)).toEqual({
      phase: 'pulling',
      filesDone: 0,
      filesTotal: 0,
      bytesDone: size,
      bytesTotal: size,
      etaSeconds: 0,
    });
  });
});
