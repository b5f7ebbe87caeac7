import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startLocalService } from '../../cli/local-service.ts';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { integrityOf } from '../helpers/database-integrity.ts';
import { runHelper } from '../helpers/helper-process.ts';
import { seededRandom } from '../helpers/seeded-random.ts';
import { stagedLeftovers } from '../helpers/staged-shards.ts';
import { fingerprintTree, treeStateOf } from '../helpers/tree-fingerprint.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// kill -9 at points nobody chose: a folder edited between backups (among the edits, files put
// back that an older version holds, which a backup leaves out of the shards it sends), each
// backup killed after a delay drawn from a fixed seed (wherever it is then: starting, reading,
// pushing, trimming, uploading, completing, committing its file index), fourteen times over.
// Then one backup that runs to its end must complete, and restore the folder as it is; every
// version a killed backup stored must restore the folder as it was before one of the backups,
// never a mix; both databases must be whole, nothing must be left pending or staged. Where
// each kill lands depends on the machine's speed; whatever it is, the outcome must hold.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-random-crashes-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The same edits and delays on every run, unless CRASH_SEED says otherwise. */
const seed = Number(process.env['CRASH_SEED'] ?? 20261126);
const { next: random, below } = seededRandom(seed);

const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
let made = 0;

/** A file written as if a minute ago, of up to 2.5 MiB or a few KiB. */
function writeSome(): void {
  const big = random() < 0.3;
  const file = path.join(source, `folder-${below(4)}`, `file-${made++}.bin`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, randomBytes(big ? (1 << 20) + below(3 << 19) : below(8192)));
  const aMinuteAgo = new Date(Date.now() - 60_000);
  utimesSync(file, aMinuteAgo, aMinuteAgo);
}

function filesNow(): string[] {
  return readdirSync(source, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** A backup in a process of its own, killed after `delayMs` unless it ended first. */
async function backupKilledAfter(delayMs: number): Promise<'killed' | 'finished'> {
  // A point never reached: the timer kills it.
  const backup = runHelper('crashing-backup', [home, source, 'read:1000000000']);
  const timer = setTimeout(() => backup.child.kill('SIGKILL'), delayMs);
  const { code, signal } = await backup.exited;
  clearTimeout(timer);
  if (signal === 'SIGKILL') return 'killed';
  if (code !== 0) throw new Error(`the backup failed on its own (${code}):\n${backup.output()}`);
  return 'finished';
}

describe('backups killed at random points', () => {
  it('leave a folder the next backup stores whole, with both databases whole and nothing left over', async () => {
    for (let i = 0; i < 16; i += 1) writeSome();
    const setup = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    await setup.loginLocal({});
    await setup.createBucket({ name: 'Crash', type: 'backup', storageClass: 'hot' });
    await setup.close();

    const outcomes: string[] = [];
    /** Files deleted by the edits, with their bytes, to be put back by later ones. */
    const deleted: Array<{ file: string; bytes: Buffer }> = [];
    let putBack = 0;
    /** The folder as each backup found it when it started. */
    const statesBackedUp = new Set<string>();
    for (let round = 0; round < 14; round += 1) {
      // Edits: new files, files rewritten or deleted, and deleted files put back, whose bytes
      // an older version holds (the backup leaves them out of the shards it sends).
      for (let edits = below(4); edits > 0; edits -= 1) {
        const files = filesNow();
        const file = files[below(files.length)];
        const what = below(4);
        if (what === 0 || file === undefined) writeSome();
        else if (what === 1) writeFileSync(file, randomBytes(below(2 << 20)));
        else if (what === 2) {
          deleted.push({ file, bytes: readFileSync(file) });
          rmSync(file);
        } else {
          const [back] = deleted.splice(below(deleted.length), 1);
          if (!back) writeSome();
          else {
            writeSettled(back.file, back.bytes);
            putBack += 1;
          }
        }
      }
      // The process takes about 0.7 s to start, and its backup about as long again.
      const delayMs = 300 + below(1500);
      statesBackedUp.add(treeStateOf(source));
      outcomes.push(`${delayMs} ms: ${await backupKilledAfter(delayMs)}`);
    }
    // Where the kills fell, to replay a failure with its seed.
    console.log(`CRASH_SEED=${seed}: ${outcomes.join(', ')}; ${putBack} files put back`);

    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      const last = await engine.backup({ dir: source, bucket: 'Crash' });
      expect(last.skipped).toEqual([]);
      const versions = await engine.listVersions({ bucket: 'Crash' });
      expect(
        versions.filter((version) => version.state !== 'outdated').map((v) => v.state),
      ).toEqual(['active']);
      const target = path.join(scratch, 'restored');
      await engine.restore({ bucket: 'Crash', to: target, overwrite: false });
      expect(fingerprintTree(target)).toEqual(fingerprintTree(source));
      // The versions the killed backups stored, each as one of them found the folder.
      const stored = versions.filter((version) => version.state === 'outdated');
      for (const version of stored) {
        const copy = path.join(scratch, `version-${version.id}`);
        await engine.restore({ bucket: 'Crash', version: version.id, to: copy, overwrite: false });
        expect(statesBackedUp.has(treeStateOf(copy)), `version ${version.id}`).toBe(true);
      }
      console.log(`${stored.length} versions stored by the killed backups restored as found`);
      expect(await engine.verify({ bucket: 'Crash', all: true })).toMatchObject({
        unavailable: [],
      });
    } finally {
      await engine.close();
    }
    expect(stagedLeftovers(home)).toEqual([]);
    expect(integrityOf(path.join(home, 'state.sqlite'))).toBe('ok');
    expect(integrityOf(path.join(home, 'local-server', 'service.sqlite'))).toBe('ok');
  });
});
