import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  closeSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { afterAll, describe, expect, it } from 'vitest';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine, type RestoredVersion } from '../../main/index.ts';
import { tidyStoppedRestores } from '../../main/engine/stopped-restores.ts';
import { RAW_CODEC } from '../../main/protocol/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { runCanopy, runCanopyWatched } from '../helpers/canopy-cli.ts';
import { nobodyEngine } from '../helpers/nobody-engine.ts';
import { restoreTemporariesIn } from '../helpers/restore-temporaries.ts';
import { startProxiedService } from '../helpers/proxied-service.ts';
import { damageStoredBlock } from '../helpers/stored-blocks.ts';
import type { FaultProxy } from '../helpers/fault-proxy.ts';

// A restore stopped part-way (killed, or stopped by the user) keeps the large file it was
// writing, and the next restore into the same place goes on with it: the leaves it holds whole
// are neither fetched again nor trusted unchecked.

const here = path.dirname(fileURLToPath(import.meta.url));
const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restore-resume-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const MIB = 1024 * 1024;
const NOBODY = 65534;
/** The large file: 40 leaves of 1 MiB. */
const movie = randomBytes(40 * MIB);

/** A home and the embedded service's data, with the bucket Films holding a backup of the movie. */
interface BackedUp {
  readonly home: string;
  readonly dataDir: string;
  readonly engine: () => Engine;
}

/** A new home, logged in to its own embedded service, with the movie backed up into Films. */
async function backedUp(name: string): Promise<BackedUp> {
  const source = path.join(scratch, name, 'source');
  const home = path.join(scratch, name, 'home');
  const dataDir = path.join(scratch, name, 'data');
  mkdirSync(path.join(source, 'notes'), { recursive: true });
  writeFileSync(path.join(source, 'movie.bin'), movie);
  for (let i = 0; i < 5; i += 1)
    writeFileSync(path.join(source, 'notes', `note-${i}.txt`), `note ${i}\n`);
  const engine = (): Engine =>
    createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
  const setup = engine();
  try {
    await setup.loginLocal({ dataDir });
    await setup.createBucket({ name: 'Films', type: 'backup', storageClass: 'hot' });
    await setup.backup({ dir: source, bucket: 'Films' });
  } finally {
    await setup.close();
  }
  return { home, dataDir, engine };
}

/** The one part-written file of the movie below `dir`: the temporary over 1 MiB. */
function moviePartIn(dir: string): string {
  const parts = restoreTemporariesIn(dir).filter((file) => statSync(file).size > MIB);
  expect(parts).toHaveLength(1);
  return parts[0] ?? '';
}

/** How many of the movie's leaves `part` holds whole from its start. */
function leavesHeldBy(part: string): number {
  const bytes = readFileSync(part);
  let leaves = 0;
  while (
    (leaves + 1) * MIB <= bytes.length &&
    bytes
      .subarray(leaves * MIB, (leaves + 1) * MIB)
      .equals(movie.subarray(leaves * MIB, (leaves + 1) * MIB))
  )
    leaves += 1;
  return leaves;
}

/** The CID of the movie's leaf `index`, as the packer names it. */
async function movieLeaf(index: number): Promise<string> {
  const digest = await sha256.digest(movie.subarray(index * MIB, (index + 1) * MIB));
  return CID.createV1(RAW_CODEC, digest).toString();
}

/** Kills a restore of Films into `target` once it wrote about 12 MiB. */
function killRestorePartWay(home: string, target: string): void {
  const crashed = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      path.join(here, '..', 'helpers', 'crashing-restore.ts'),
      home,
      'Films',
      target,
      `${12 * MIB}B`,
    ],
    { encoding: 'utf8' },
  );
  expect(crashed.signal).toBe('SIGKILL');
}

/** What a restore of Films into `target` did, by a new engine of the home, closed after. */
async function restoredBy(engine: () => Engine, target: string): Promise<RestoredVersion> {
  const again = engine();
  try {
    return await again.restore({ bucket: 'Films', to: target, overwrite: false });
  } finally {
    await again.close();
  }
}

/** Restore marks left in `home`. */
function restoreMarks(home: string): string[] {
  return readdirSync(path.join(home, 'locks')).filter((name) => name.startsWith('restore-'));
}

/** A restore of Films into `target` that is to fail: its error. */
async function failedRestore(device: Engine, target: string): Promise<unknown> {
  return device.restore({ bucket: 'Films', to: target, overwrite: false }).then(
    () => {
      throw new Error('the restore was to fail');
    },
    (error: unknown) => error,
  );
}

/**
 * Runs `run` with a device of a new home logged in through a fault proxy to a test service,
 * the movie backed up into Films, and a target to restore into; closes them all after.
 */
async function behindProxy(
  name: string,
  run: (device: Engine, proxy: FaultProxy, target: string) => Promise<void>,
): Promise<void> {
  const { service, proxy } = await startProxiedService();
  const home = path.join(scratch, name, 'home');
  // Few and quick retries, so that a broken answer stops the restore soon.
  const device = createEngine({
    home,
    secrets: new FileSecretStore(home),
    retry: { attempts: 2, baseDelayMs: 10, maxDelayMs: 20 },
    outageBudgetMs: 200,
  });
  try {
    await device.login({ server: service.url, code: service.addUser('ann@example.org').code });
    await device.createBucket({ name: 'Films', type: 'backup', storageClass: 'hot' });
    const source = path.join(scratch, name, 'source');
    mkdirSync(source, { recursive: true });
    writeFileSync(path.join(source, 'movie.bin'), movie);
    await device.backup({ dir: source, bucket: 'Films' });
    await run(device, proxy, path.join(scratch, name, 'target'));
  } finally {
    await device.close();
    await proxy.close();
    await service.close();
  }
}

describe('a restore stopped part-way through a large file', () => {
  it('goes on after a kill from the leaves the file holds, without fetching them again', async () => {
    const { home, dataDir, engine } = await backedUp('killed');
    const target = path.join(scratch, 'killed', 'target');
    killRestorePartWay(home, target);
    const held = leavesHeldBy(moviePartIn(target));
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(40);
    // The server can no longer give those leaves back whole: fetched again, they would fail.
    for (let leaf = 0; leaf < held; leaf += 1) damageStoredBlock(dataDir, await movieLeaf(leaf));

    const again = engine();
    try {
      // A dry run tells it would go on with the part file, and leaves it for the restore.
      const plan = await again.planRestore({ bucket: 'Films', to: target, overwrite: false });
      expect(plan.partFiles).toEqual({ files: 1, bytes: statSync(moviePartIn(target)).size });
      const result = await again.restore({ bucket: 'Films', to: target, overwrite: false });
      expect(result).toMatchObject({
        continuedFiles: 1,
        keptBytes: held * MIB,
        notRestored: [],
        unavailable: [],
      });
    } finally {
      await again.close();
    }
    expect(readFileSync(path.join(target, 'movie.bin')).equals(movie)).toBe(true);
    expect(restoreTemporariesIn(target)).toEqual([]);
    expect(restoreMarks(home)).toEqual([]);
  });

  it('goes on after Ctrl-C and a backup, fetching again from a leaf changed since', async () => {
    const { home } = await backedUp('stopped');
    const target = path.join(scratch, 'stopped', 'target');
    const fileStore = { CANOPY_SECRET_STORE: 'file' };
    let interrupted = false;
    const stopped = await runCanopyWatched(
      home,
      ['restore', '--bucket', 'Films', '--to', target, '--limit-download', '16MB', '--progress'],
      fileStore,
      (stderr, canopy) => {
        const written = [...stderr.matchAll(/^restoring: \S+ files, ([\d.]+) MB of/gm)].at(-1);
        if (!interrupted && Number(written?.[1]) >= 12) {
          interrupted = true;
          canopy.kill('SIGINT');
        }
      },
    );
    expect(stopped.stderr).toMatch(
      /^canopy: the restore was stopped: the files it finished are in place, and running it again brings the rest; the large file it was writing is kept as written so far \(\d+(\.\d)? MB, under a hidden name\): the same restore run again goes on from there\n$/m,
    );
    expect(stopped.status).toBe(130);
    const part = moviePartIn(target);
    expect(leavesHeldBy(part)).toBeGreaterThan(3);
    // A backup between the two tidies after stopped restores, and keeps the part file.
    const other = path.join(scratch, 'stopped', 'other-source');
    mkdirSync(other, { recursive: true });
    writeFileSync(path.join(other, 'todo.txt'), 'call the plumber\n');
    const errands = ['--bucket', 'Errands'];
    for (const args of [
      ['buckets', 'create', 'Errands', '--type', 'backup', '--class', 'hot'],
      ['backup', other, ...errands],
    ])
      expect((await runCanopy(home, args, fileStore)).status).toBe(0);
    expect(moviePartIn(target)).toBe(part);
    // A byte of its third leaf changed since: from there on, it is fetched again.
    const file = openSync(part, 'r+');
    try {
      writeSync(file, Buffer.from([(movie[2 * MIB + 5] ?? 0) ^ 0xff]), 0, 1, 2 * MIB + 5);
    } finally {
      closeSync(file);
    }

    const again = await runCanopy(
      home,
      ['restore', '--bucket', 'Films', '--to', target, '--progress'],
      fileStore,
    );
    // It reads back the part file first, as a phase of its own.
    expect(again.stderr).toMatch(
      /^reading back what a stopped restore part-wrote: 1\/1 files, ([\d.]+) MB of \1 MB, /m,
    );
    expect(again.stdout).toContain(
      'went on with 1 large file a stopped restore had part-written: 2.1 MB of it kept, not fetched again',
    );
    expect(readFileSync(path.join(target, 'movie.bin')).equals(movie)).toBe(true);
    expect(restoreTemporariesIn(target)).toEqual([]);
    expect(restoreMarks(home)).toEqual([]);
  });

  it('goes on after the network stopped it, and its failure says what it keeps', async () => {
    await behindProxy('network', async (device, proxy, target) => {
      // The first batch of leaves comes whole; every answer after it breaks off.
      proxy.schedule(['pass', 'cut', 'cut', 'cut', 'cut'], /\/blocks\/car$/);
      const failure = await failedRestore(device, target);
      proxy.schedule([]);
      expect(failure).toMatchObject({ code: 'network' });
      expect((failure as Error).message).toMatch(
        /; the large file it was writing is kept as written so far \(\d+(\.\d)? MB, under a hidden name\): the same restore run again goes on from there$/,
      );
      const held = leavesHeldBy(moviePartIn(target));
      expect(held).toBeGreaterThan(0);

      const result = await device.restore({ bucket: 'Films', to: target, overwrite: false });
      expect(result).toMatchObject({ continuedFiles: 1, keptBytes: held * MIB });
      expect(readFileSync(path.join(target, 'movie.bin')).equals(movie)).toBe(true);
      expect(restoreTemporariesIn(target)).toEqual([]);
    });
  });

  it('keeps no empty part file when the network stopped it before the file got a byte', async () => {
    await behindProxy('network-at-once', async (device, proxy, target) => {
      proxy.schedule(['cut', 'cut', 'cut', 'cut'], /\/blocks\/car$/);
      const failure = await failedRestore(device, target);
      proxy.schedule([]);
      expect(failure).toMatchObject({ code: 'network' });
      // Nothing of the movie is kept, so nothing is told as kept: no "(0 B, under a hidden name)".
      expect((failure as Error).message).not.toMatch(/kept as written so far/);
      expect(restoreTemporariesIn(target)).toEqual([]);

      const result = await device.restore({ bucket: 'Films', to: target, overwrite: false });
      expect(result).toMatchObject({ continuedFiles: 0, keptBytes: 0 });
      expect(readFileSync(path.join(target, 'movie.bin')).equals(movie)).toBe(true);
    });
  });

  it('writes the file again whole when its part file cannot be written to', async () => {
    const { home, engine } = await backedUp('immutable');
    const target = path.join(scratch, 'immutable', 'target');
    killRestorePartWay(home, target);
    const part = moviePartIn(target);
    // Marked immutable since (chattr +i): it reads, and refuses to be written, even to root.
    execFileSync('chattr', ['+i', part]);
    try {
      expect(await restoredBy(engine, target)).toMatchObject({
        continuedFiles: 0,
        keptBytes: 0,
        notRestored: [],
      });
    } finally {
      execFileSync('chattr', ['-i', part]);
    }
    expect(readFileSync(path.join(target, 'movie.bin')).equals(movie)).toBe(true);
  });

  it('neither reads nor writes through a link put where its part file was', async () => {
    const { home, engine } = await backedUp('linked');
    const target = path.join(scratch, 'linked', 'target');
    killRestorePartWay(home, target);
    const part = moviePartIn(target);
    // Someone with a hand in the target folder swaps the part file for a link to a file of
    // theirs that holds the movie's first leaves: followed, those would be kept unfetched, and
    // the rest written into that file.
    const elsewhere = path.join(scratch, 'linked', 'elsewhere.bin');
    const bait = movie.subarray(0, 20 * MIB);
    writeFileSync(elsewhere, bait);
    const baitTime = statSync(elsewhere).mtimeMs;
    rmSync(part);
    symlinkSync(elsewhere, part);

    expect(await restoredBy(engine, target)).toMatchObject({
      continuedFiles: 0,
      keptBytes: 0,
      notRestored: [],
    });
    const restored = path.join(target, 'movie.bin');
    expect(lstatSync(restored).isFile()).toBe(true);
    expect(readFileSync(restored).equals(movie)).toBe(true);
    expect(readFileSync(elsewhere).equals(bait)).toBe(true);
    expect(statSync(elsewhere).mtimeMs).toBe(baitTime);
    // The link is taken away with the rest of what the stopped restore left.
    expect(restoreTemporariesIn(target)).toEqual([]);
    expect(restoreMarks(home)).toEqual([]);
  });

  it('fetches the file whole when its part file may no longer be read', () => {
    // As nobody, since root reads any file.
    chmodSync(scratch, 0o755);
    mkdirSync(path.join(scratch, 'unreadable'));
    const asNobody = nobodyEngine(path.join(scratch, 'unreadable', 'home'));
    const source = path.join(scratch, 'unreadable', 'source');
    mkdirSync(source);
    writeFileSync(path.join(source, 'movie.bin'), movie);
    const target = path.join(scratch, 'unreadable', 'target');
    mkdirSync(target);
    chownSync(target, NOBODY, NOBODY);
    for (const args of [
      ['login', 'Films'],
      ['backup', source, 'Films'],
    ])
      expect(asNobody(args).status).toBe(0);
    expect(asNobody(['crash-restore', 'Films', target, `${12 * MIB}B`]).signal).toBe('SIGKILL');
    // Taken by root since (a backup tool run as root, say), and closed to others.
    const part = moviePartIn(target);
    chownSync(part, 0, 0);
    chmodSync(part, 0o600);

    const again = asNobody(['restore', 'Films', target]);
    expect(again.stderr).toBe('');
    expect(again.status).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      continuedFiles: 0,
      keptBytes: 0,
      notRestored: [],
    });
    expect(readFileSync(path.join(target, 'movie.bin')).equals(movie)).toBe(true);
    // In nobody's folder, nobody may take it away.
    expect(restoreTemporariesIn(target)).toEqual([]);
  });

  it('keeps the part file from restores elsewhere, for a week', async () => {
    const { home, engine } = await backedUp('left');
    const target = path.join(scratch, 'left', 'target');
    killRestorePartWay(home, target);
    const part = moviePartIn(target);

    const elsewhere = engine();
    try {
      const result = await elsewhere.restore({
        bucket: 'Films',
        path: 'notes',
        to: path.join(scratch, 'left', 'notes-back'),
        overwrite: false,
      });
      expect(result).toMatchObject({ files: 5, continuedFiles: 0 });
    } finally {
      await elsewhere.close();
    }
    expect(moviePartIn(target)).toBe(part);

    const eightDaysOn = Date.now() + 8 * 24 * 60 * 60 * 1000;
    expect(tidyStoppedRestores(home, undefined, eightDaysOn).removed).toBe(1);
    expect(restoreTemporariesIn(target)).toEqual([]);
    expect(restoreMarks(home)).toEqual([]);
  });
});
