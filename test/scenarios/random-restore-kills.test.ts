import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startLocalService } from '../../cli/local-service.ts';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { runHelper } from '../helpers/helper-process.ts';
import { restoreTemporariesIn } from '../helpers/restore-temporaries.ts';
import { seededRandom } from '../helpers/seeded-random.ts';
import { fingerprintTree, type Fingerprint } from '../helpers/tree-fingerprint.ts';

// kill -9 at points nobody chose, over and over, in restores of a folder of large files: each
// restore goes on with the part-written files the one before left (reading them back, then
// writing after what they hold), and is killed wherever it is then, ten times over or more; now
// and then a byte of a part file is changed between two of them, as a disk or a user might. Then
// one restore that runs to its end must go on with what the last left, give the folder back byte
// for byte, and leave nothing under a temporary name, nor any restore mark.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-random-restore-kills-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The same sizes, delays and damage on every run, unless RESUME_SEED says otherwise. */
const seed = Number(process.env['RESUME_SEED'] ?? 20261201);
const { below } = seededRandom(seed);

const MIB = 1024 * 1024;
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const target = path.join(scratch, 'target');

/** The files below `root`, with their contents, modes and mtimes, by their paths. */
function filesOf(root: string): Map<string, Fingerprint> {
  return new Map([...fingerprintTree(root)].filter(([, entry]) => entry.type === 'file'));
}

/** The SHA-256 of the file's first MiB (its first leaf), or '' when it holds less. */
function firstLeafOf(file: string): string {
  const bytes = Buffer.alloc(MIB);
  const fd = openSync(file, 'r');
  try {
    if (readSync(fd, bytes, 0, MIB, 0) < MIB) return '';
  } finally {
    closeSync(fd);
  }
  return createHash('sha256').update(bytes).digest('hex');
}

/** A restore into the target in a process of its own, killed after `delayMs` unless it ended. */
async function restoreKilledAfter(delayMs: number): Promise<'killed' | 'finished'> {
  // A count of bytes never reached, at its slow download limit: the timer kills it.
  const restore = runHelper('crashing-restore', [home, 'Films', target, `${2 ** 40}B`]);
  const timer = setTimeout(() => restore.child.kill('SIGKILL'), delayMs);
  const { code, signal } = await restore.exited;
  clearTimeout(timer);
  if (signal === 'SIGKILL') return 'killed';
  if (code !== 0) throw new Error(`the restore failed on its own (${code}):\n${restore.output()}`);
  return 'finished';
}

describe('restores killed at random points', () => {
  it('go on with their part-written files, and the last gives the folder back byte for byte', async () => {
    /** The first leaf of each large file, which a part file the last restore goes on with holds. */
    const firstLeaves = new Set<string>();
    for (let i = 0; i < 3; i += 1) {
      const folder = path.join(source, `reel-${i}`);
      mkdirSync(folder, { recursive: true });
      // From 16 MiB, a part file is kept; some sizes end part-way through a leaf.
      writeFileSync(path.join(folder, 'take.mov'), randomBytes(16 * MIB + below(20 * MIB)));
      firstLeaves.add(firstLeafOf(path.join(folder, 'take.mov')));
      for (let note = 0; note < 10; note += 1)
        writeFileSync(path.join(folder, `note-${note}.txt`), randomBytes(below(8192)));
    }
    const setup = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      await setup.loginLocal({});
      await setup.createBucket({ name: 'Films', type: 'backup', storageClass: 'hot' });
      await setup.backup({ dir: source, bucket: 'Films' });
    } finally {
      await setup.close();
    }

    const outcomes: string[] = [];
    /**
     * Whether the last round left a part file holding its file's first leaf whole, for the last
     * restore to go on with. Not when a byte of a first leaf was changed: in that round, or in
     * one before it that the round after did not reach (killed before it read the part files).
     */
    let partLeftToGoOn = false;
    // Ten rounds, and more (up to twenty) until one leaves a part file to go on with.
    for (let round = 0; round < 10 || (!partLeftToGoOn && round < 20); round += 1) {
      // The process takes about a second to start; all of it, about 4 s.
      const delayMs = 800 + below(3200);
      const outcome = await restoreKilledAfter(delayMs);
      // One that finished is started again from nothing, to be killed again.
      if (outcome === 'finished') rmSync(target, { recursive: true, force: true });
      const parts = restoreTemporariesIn(target).filter((file) => statSync(file).size > MIB);
      outcomes.push(`${delayMs} ms: ${outcome}, ${parts.length} part files`);
      const damaged = parts[below(parts.length * 4)];
      if (damaged !== undefined) {
        const at = below(statSync(damaged).size);
        const file = openSync(damaged, 'r+');
        try {
          writeSync(file, randomBytes(1), 0, 1, at);
        } finally {
          closeSync(file);
        }
        outcomes.push(`byte ${at} of a part file changed`);
      }
      partLeftToGoOn = parts.some((file) => firstLeaves.has(firstLeafOf(file)));
    }
    // Where the kills fell, to replay a failure with its seed.
    console.log(`RESUME_SEED=${seed}: ${outcomes.join(', ')}`);

    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      const result = await engine.restore({ bucket: 'Films', to: target, overwrite: false });
      expect(result.notRestored).toEqual([]);
      expect(result.continuedFiles).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
    // Files only: folders the killed restores made are there already, and keep their times.
    expect(filesOf(target)).toEqual(filesOf(source));
    expect(restoreTemporariesIn(target)).toEqual([]);
    expect(
      readdirSync(path.join(home, 'locks')).filter((name) => name.startsWith('restore-')),
    ).toEqual([]);
  });
});
