import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  rmSync,
  statSync,
  truncateSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  canopySucceeds,
  localHomeBackedUp,
  runCanopy,
  versionsListed,
} from '../helpers/canopy-cli.ts';
import { onTerminal } from '../helpers/on-terminal.ts';
import { underFailingDisk } from '../helpers/failing-disk.ts';
import { runServerCommand, SERVER_BIN } from '../helpers/server-process.ts';
import { canopyProcess } from '../helpers/canopy-command-line.ts';
import { ServiceContext } from '../../server/context.ts';
import { defaultServiceOptions } from '../../server/options.ts';
import { checkStore, type StoreCheck } from '../../server/blocks/store-check.ts';
import { blocksInPack, packIds } from '../../server/store/stored-blocks.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// `canopy-server check` reads back every block and metadata chunk of a data folder (a
// self-hosted server's, or this computer's own backups on an external disk) and checks each
// against its name. What it finds not whole, it names by file; with --notify it tells the users
// whose backups hold it, whose verify then finds the blocks and whose next backup sends them
// again, after which the check finds all whole.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-check-'));
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});
const fileStore = { CANOPY_SECRET_STORE: 'file' };

interface CheckJson {
  whole: boolean;
  blocks: number;
  problems: Array<{ cid: string; file: string; kind: string }>;
  metadata_problems: Array<{ file: string; chunks: number }>;
  holders: Array<{ email: string; blocks: number }>;
}

function checkJson(data: string, ...more: string[]): { status: number; report: CheckJson } {
  const run = runServerCommand(['check', '--data', data, '--json', ...more]);
  return { status: run.status, report: JSON.parse(run.stdout) as CheckJson };
}

function filesIn(folder: string): string[] {
  return readdirSync(folder).map((name) => path.join(folder, name));
}

/** Overwrites 4 bytes of `file` at `offset`, as a bad sector or a stray write would. */
function damage(file: string, offset: number): void {
  const fd = openSync(file, 'r+');
  try {
    writeSync(fd, Buffer.from('XXXX'), 0, 4, offset);
  } finally {
    closeSync(fd);
  }
}

describe('canopy-server check', () => {
  it('finds a damaged block, tells its holder, and finds all whole once a backup sent it again', async () => {
    const { home, data, source } = await localHomeBackedUp(path.join(scratch, 'flip'), 'Photos', {
      'beach.jpg': randomBytes(3_000_000),
      'note.txt': 'sunny',
    });
    const whole = runServerCommand(['check', '--data', data]);
    expect(whole.stdout).toMatch(
      /^checked 4 blocks \(3\.0 MB\) and 1 metadata chunk \(\d+ B\) in \d+\.\d s: all whole\n$/,
    );
    expect(whole.status).toBe(0);
    // Its progress is for a terminal only.
    expect(whole.stderr).toBe('');
    const watched = await onTerminal(
      process.execPath,
      [SERVER_BIN, 'check', '--data', data],
      process.env,
    ).ended;
    expect(watched.code).toBe(0);
    // Each line rewrites the one before, the last clearing it for the report.
    const rewritten = watched.shown.split('\r\u001b[K');
    expect(rewritten[0]).toBe('checking: 0 B of 3.0 MB read back (0%), estimating time left');
    expect(rewritten.at(-1)).toMatch(/^checked 4 blocks .*: all whole\r\n$/);

    const [pack = ''] = filesIn(path.join(data, 'packs'));
    damage(pack, 1_500_000);
    const found = runServerCommand(['check', '--data', data, '--notify']);
    const lines = found.stdout.split('\n');
    expect(lines[0]).toBe(`${pack}: 1 block damaged (its bytes no longer match its CID)`);
    expect(lines[1]).toMatch(/: 1 block not whole$/);
    expect(lines[2]).toMatch(/^held by \S+ \(1 block\): .*each was told so in a notification$/);
    expect(found.status).toBe(1);

    const told = await runCanopy(home, ['notifications'], fileStore);
    expect(told.stdout).toContain('found 1 block of your backups damaged or unreadable');
    const verified = await runCanopy(home, ['verify', '--bucket', 'Photos', '--all'], fileStore);
    expect(verified.stdout).toContain('cannot restore beach.jpg');
    expect(verified.status).toBe(1);
    // Unchanged, the file is read again for the block the verify found, and sent.
    const backup = await canopySucceeds(home, 'backup', source, '--bucket', 'Photos');
    expect(backup).toMatch(/sent again \d+ blocks? the server could not give back whole/);
    expect(checkJson(data)).toMatchObject({ status: 0, report: { whole: true, problems: [] } });
  });

  it('names a pack gone from the disk, one cut short, and a damaged metadata chunk', async () => {
    const run = path.join(scratch, 'gone');
    const { home, data, source } = await localHomeBackedUp(run, 'Letters', {
      'first.txt': 'dear ann',
    });
    writeSettled(path.join(source, 'second.txt'), randomBytes(10_000));
    await canopySucceeds(home, 'backup', source, '--bucket', 'Letters');
    const packs = filesIn(path.join(data, 'packs'));
    expect(packs).toHaveLength(2);
    const before = checkJson(data).report;
    expect(before.whole).toBe(true);

    const [lost = '', kept = ''] = packs;
    rmSync(lost);
    truncateSync(kept, statSync(kept).size - 4);
    const [chunks = ''] = filesIn(path.join(data, 'metadata', 'chunks'));
    damage(chunks, 100);
    const { status, report } = checkJson(data);
    expect(status).toBe(1);
    expect(report.blocks).toBe(before.blocks);
    expect(report.problems).toEqual(
      expect.arrayContaining([
        { cid: expect.any(String), file: lost, kind: 'missing' },
        { cid: expect.any(String), file: kept, kind: 'cut_short' },
      ]),
    );
    expect(report.problems).toHaveLength(2);
    expect(report.metadata_problems).toEqual([{ file: chunks, chunks: 1 }]);
    expect(report.holders).toEqual([{ email: expect.any(String), blocks: 2 }]);
  });

  it('checks a block where a compaction beside it moved it, in a pack made after it began', async () => {
    const run = path.join(scratch, 'moved');
    const { home, data } = await localHomeBackedUp(run, 'Keep', {
      'kept.bin': randomBytes(100_000),
    });
    // A bucket whose first version's pack is left mostly dead once that version is deleted.
    const album = path.join(run, 'album');
    mkdirSync(album);
    writeSettled(path.join(album, 'big.bin'), randomBytes(3 * 1024 * 1024));
    writeSettled(path.join(album, 'small.bin'), randomBytes(500_000));
    await canopySucceeds(home, 'buckets', 'create', 'Album', '--type', 'backup', '--class', 'hot');
    await canopySucceeds(home, 'backup', album, '--bucket', 'Album');
    const [first] = await versionsListed(home, 'Album');
    if (!first) throw new Error('the first backup of Album made no version');
    rmSync(path.join(album, 'big.bin'));
    await canopySucceeds(home, 'backup', album, '--bucket', 'Album');

    // The check runs here, `canopy versions delete` in another process meanwhile: its service
    // frees the first version's blocks on closing, and compacts the pack they leave mostly dead.
    const ctx = new ServiceContext(defaultServiceOptions(data));
    const packsAtStart = new Set(packIds(ctx.db));
    let checked: StoreCheck;
    let movedTo: string | undefined;
    try {
      let bytesBefore = 0;
      checked = await checkStore(ctx, (bytesDone) => {
        const block = bytesDone - bytesBefore;
        bytesBefore = bytesDone;
        // kept.bin's block: the first or the last the check reads.
        if (block !== 100_000 || movedTo !== undefined) return;
        const deletion = canopyProcess(['versions', 'delete', first.id, '--bucket', 'Album'], {
          ...process.env,
          CANOPY_HOME: home,
          CANOPY_SECRET_STORE: 'file',
        });
        const deleted = spawnSync(deletion.command, deletion.args, { env: deletion.env });
        expect(deleted.stderr.toString()).toBe('');
        expect(deleted.status).toBe(0);
        const made = packIds(ctx.db).filter((pack) => !packsAtStart.has(pack));
        expect(made).toHaveLength(1);
        movedTo = made[0] ?? '';
        // small.bin's block, alone in the pack the compaction made, damaged there.
        const [moved] = blocksInPack(ctx.db, movedTo);
        expect(moved?.size).toBe(500_000);
        damage(ctx.blocks.packPath(movedTo), (moved?.offset ?? 0) + 1000);
      });
    } finally {
      ctx.close();
    }
    expect(movedTo).toBeDefined();
    // Found where it went, and nothing the compaction moved or freed taken for missing.
    expect(checked.problems).toEqual([
      { cid: expect.any(String), file: ctx.blocks.packPath(movedTo ?? ''), kind: 'damaged' },
    ]);
  });

  it('refuses a folder that holds no data of a server, and makes nothing there', () => {
    const mistyped = path.join(scratch, 'not-mounted');
    const refused = runServerCommand(['check', '--data', mistyped]);
    expect(refused.stderr).toBe(
      `canopy-server: ${mistyped} holds no data of a Canopy server (no service.sqlite): give its data folder with --data; an external disk must be mounted\n`,
    );
    expect(refused.status).toBe(1);
    expect(existsSync(mistyped)).toBe(false);
  });

  it("tells another user to run it as the data's owner, for the folder and for a pack it cannot read", async () => {
    const run = path.join(scratch, 'owner');
    const { data } = await localHomeBackedUp(run, 'Tax', { 'return.pdf': randomBytes(5000) });
    // nobody reaches the data folder, as an administrator's own account would a service's.
    for (const folder of [scratch, run]) chmodSync(folder, 0o755);
    const asNobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'];
    const notOwner = runServerCommand(['check', '--data', data], asNobody);
    expect(notOwner.stderr).toBe(
      `canopy-server: this user may not write in ${data}: run canopy-server check as the user that runs serve, who owns the data\n`,
    );
    expect(notOwner.status).toBe(1);

    // Its folder is nobody's, but one pack is still root's alone (copied in by root).
    spawnSync('chown', ['-R', '65534:65534', data]);
    const [pack = ''] = filesIn(path.join(data, 'packs'));
    chownSync(pack, 0, 0);
    chmodSync(pack, 0o600);
    const packRefused = runServerCommand(['check', '--data', data], asNobody);
    expect(packRefused.stderr).toBe(
      `canopy-server: cannot read ${pack}: permission denied; run canopy-server check as the user that runs serve, who owns the data\n`,
    );
    expect(packRefused.status).toBe(1);
  });

  it('names the blocks its disk would not read', async () => {
    const { data } = await localHomeBackedUp(path.join(scratch, 'eio'), 'Music', {
      'song.flac': randomBytes(2_500_000),
    });
    const [pack = ''] = filesIn(path.join(data, 'packs'));
    // strace fails every read of the pack with an I/O error, as a bad sector would.
    const failing = runServerCommand(
      ['check', '--data', data],
      underFailingDisk('read,pread64,preadv', 'EIO', [pack]),
    );
    expect(failing.stdout.split('\n')[0]).toBe(
      `${pack}: 3 blocks unreadable (the disk failed to read them: an I/O error)`,
    );
    expect(failing.status).toBe(1);
  });
});
