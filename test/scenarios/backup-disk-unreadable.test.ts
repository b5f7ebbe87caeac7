import { afterAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { localHomeBackedUp, runCanopy } from '../helpers/canopy-cli.ts';
import { engineCountingBlockRequests } from '../helpers/counted-block-requests.ts';
import { canopyWithCallsFailing } from '../helpers/failing-disk.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// A backup disk with a bad sector under some of its backups, or that lost files of them: the embedded service's disk fails
// to read one pack of blocks (EIO, injected by strace for the pack's file). A restore brings
// back everything else, names the files it could not, and why; the next backup sends those
// blocks again from the folder, and the restore then brings back every file, the bad sector
// still there.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-unreadable-backups-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const fileStore = { CANOPY_SECRET_STORE: 'file' };

/**
 * Whether two files hold the same bytes (Buffer.equals: a deep toEqual of a 12 MiB Buffer takes
 * a minute).
 */
function sameFile(a: string, b: string): boolean {
  return readFileSync(a).equals(readFileSync(b));
}

/** The pack files of the embedded service whose data is in `dataDir`. */
function packsIn(dataDir: string): string[] {
  return readdirSync(path.join(dataDir, 'packs')).map((name) => path.join(dataDir, 'packs', name));
}

describe('a backup disk that fails to read some of the backups', () => {
  it('restores the rest and names what it could not, and the next backup heals it', async () => {
    // A large file among them: each of its leaves is a read of its own, cut short in turn.
    const early = ['thesis.pdf', 'notes.txt', 'figure.png', 'lecture.mp4'];
    const {
      home,
      source,
      data: dataDir,
    } = await localHomeBackedUp(
      path.join(scratch, 'bad-sector'),
      'Studies',
      Object.fromEntries(
        early.map((name) => [name, randomBytes(name.endsWith('.mp4') ? 12 << 20 : 300_000)]),
      ),
    );
    const backup = ['backup', source, '--bucket', 'Studies', '--skip-check'];
    // The early files' blocks are in the one pack of the first backup: its sectors go bad.
    const [bad, ...others] = packsIn(dataDir);
    expect(others).toEqual([]);
    writeSettled(path.join(source, 'later.txt'), randomBytes(300_000));
    expect((await runCanopy(home, backup, fileStore)).status).toBe(0);
    const failingReads = (args: string[]) =>
      canopyWithCallsFailing(home, args, 'read,pread64,preadv', 'EIO', [bad ?? '']);

    const target = path.join(scratch, 'restored');
    const restore = failingReads(['restore', '--bucket', 'Studies', '--to', target]);
    expect(restore.status).toBe(1);
    expect(restore.stdout).toMatch(/^restored 1 file /m);
    for (const name of early)
      expect(restore.stdout).toMatch(
        new RegExp(`^could not restore ${name}: the server's disk fails to read block \\w+$`, 'm'),
      );
    expect(restore.stderr).toBe(
      'canopy: 4 items could not be restored (listed in the output); everything else is in place; the next backup of Studies sends again what its folder still holds of the blocks that did not come back whole\n',
    );
    expect(readdirSync(target)).toEqual(['later.txt']);
    expect(sameFile(path.join(target, 'later.txt'), path.join(source, 'later.txt'))).toBe(true);

    // The next backup sends those blocks again, into a pack of their own, and the restore then
    // brings back every file, the bad pack still unreadable.
    const healing = failingReads(backup);
    expect(healing.stderr).toBe('');
    expect(healing.status).toBe(0);
    const again = path.join(scratch, 'restored-again');
    const whole = failingReads(['restore', '--bucket', 'Studies', '--to', again]);
    expect(whole.stderr).toBe('');
    expect(whole.status).toBe(0);
    for (const name of [...early, 'later.txt'])
      expect(sameFile(path.join(again, name), path.join(source, name))).toBe(true);
  });

  it('restores the rest when a pack of the backups is gone, and the next backup sends it again', async () => {
    const {
      home,
      source,
      data: dataDir,
    } = await localHomeBackedUp(path.join(scratch, 'pack-gone'), 'Studies', {
      'early.txt': randomBytes(300_000),
    });
    const backup = ['backup', source, '--bucket', 'Studies', '--skip-check'];
    const [pack] = packsIn(dataDir);
    writeSettled(path.join(source, 'later.txt'), randomBytes(300_000));
    expect((await runCanopy(home, backup, fileStore)).status).toBe(0);
    // The first backup's pack is lost (a disk check removed it, a copy of the folder missed it).
    rmSync(pack ?? '');

    const target = path.join(scratch, 'gone-restored');
    const restore = await runCanopy(
      home,
      ['restore', '--bucket', 'Studies', '--to', target],
      fileStore,
    );
    expect(restore.status).toBe(1);
    expect(restore.stdout).toMatch(
      /^could not restore early\.txt: the server's disk fails to read block \w+$/m,
    );
    expect(readdirSync(target)).toEqual(['later.txt']);

    expect((await runCanopy(home, backup, fileStore)).status).toBe(0);
    const again = path.join(scratch, 'gone-restored-again');
    const whole = await runCanopy(
      home,
      ['restore', '--bucket', 'Studies', '--to', again],
      fileStore,
    );
    expect(whole.stderr).toBe('');
    for (const name of ['early.txt', 'later.txt'])
      expect(sameFile(path.join(again, name), path.join(source, name))).toBe(true);
  });

  it("tells files of the backups missing when a version's list of files is gone from the disk", async () => {
    const { home, data: dataDir } = await localHomeBackedUp(
      path.join(scratch, 'list-gone'),
      'Kitchen',
      { 'recipe.txt': 'two eggs' },
    );
    // The service's files of the version's list are gone, and this device keeps no copy.
    const chunks = path.join(dataDir, 'metadata', 'chunks');
    const away = path.join(scratch, 'list-away');
    renameSync(chunks, away);
    rmSync(path.join(home, 'metadata'), { recursive: true });

    const listed = await runCanopy(home, ['ls', '--bucket', 'Kitchen'], fileStore);
    expect(listed.stderr).toBe(
      `canopy: files of the backups in ${dataDir} are missing from its disk (removed by a disk check that found them damaged, or left out of a copy of the folder): check the disk, and put back a copy of the folder if you keep one\n`,
    );
    expect(listed.status).toBe(1);

    renameSync(away, chunks);
    const again = await runCanopy(home, ['ls', '--bucket', 'Kitchen'], fileStore);
    expect(again.stdout).toContain('recipe.txt');
  });
  /**
   * What a restore of 600 small files backed up in one pack tells, and the blocks/car requests
   * it makes, once `lose` took their blocks from the embedded service's data in `dataDir`.
   */
  async function smallFilesRestored(name: string, lose: (dataDir: string) => void) {
    const run = path.join(scratch, name);
    const source = path.join(run, 'source');
    for (let file = 0; file < 600; file += 1)
      writeSettled(path.join(source, `note-${file}.txt`), randomBytes(4096));
    const home = path.join(run, 'home');
    const dataDir = path.join(run, 'data');
    const { engine, count } = engineCountingBlockRequests(home);
    try {
      await engine.loginLocal({ dataDir });
      await engine.createBucket({ name: 'Notes', type: 'backup', storageClass: 'hot' });
      await engine.backup({ dir: source, bucket: 'Notes' });
      lose(dataDir);
      count.blocksCar = 0;
      const result = await engine.restore({
        bucket: 'Notes',
        to: path.join(run, 'restored'),
        overwrite: false,
      });
      return { result, requests: count.blocksCar };
    } finally {
      await engine.close();
    }
  }

  // A cut answer and a refusal naming what it cut on, per 1 MiB read of a pack, give or take;
  // one refusal naming those it lacks: finding each block by halving would take thousands of
  // requests, and meet the service's rate limit.
  it('names the blocks of a lost pack of small files in a few requests, not one search each', async () => {
    const { result, requests } = await smallFilesRestored('pack-of-small-files', (dataDir) => {
      const [pack, ...others] = packsIn(dataDir);
      expect(others).toEqual([]);
      rmSync(pack ?? '');
    });
    expect(result.notRestored).toHaveLength(600);
    expect(new Set(result.unavailable.map(({ why }) => why))).toEqual(new Set(['unreadable']));
    expect(requests).toBeLessThan(20);
  });

  it("names the many blocks a server's database lost in a few requests", async () => {
    const { result, requests } = await smallFilesRestored('rows-of-small-files', (dataDir) => {
      // Its database put back from a copy older than the backup, say: no row of the leaves.
      const db = new Database(path.join(dataDir, 'service.sqlite'));
      try {
        const lost = db.prepare("DELETE FROM blocks WHERE cid LIKE 'bafkrei%'").run();
        expect(lost.changes).toBe(600);
      } finally {
        db.close();
      }
    });
    expect(result.notRestored).toHaveLength(600);
    expect(new Set(result.unavailable.map(({ why }) => why))).toEqual(new Set(['missing']));
    expect(requests).toBeLessThan(10);
  });
});
