import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canopySucceeds, loginWithBucket } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// A backup of a folder in which the kernel's /proc is mounted (a backup of `/`, in little) keeps
// the mount point as an empty folder, says so, and exits 0; run again, it finds nothing changed;
// a restore brings the folder back empty. Mounting needs root, as every test run here has.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-kernel-mounts-'));
const proc = path.join(scratch, 'root', 'proc');
let procMounted = false;
afterAll(() => {
  if (procMounted) execFileSync('umount', [proc]);
  rmSync(scratch, { recursive: true, force: true });
});

describe('a backup of a folder with /proc mounted inside', () => {
  it('keeps the mount point empty, and finds nothing changed the next time', async () => {
    const home = path.join(scratch, 'home');
    await loginWithBucket(home, path.join(scratch, 'data'), 'System');
    const root = path.join(scratch, 'root');
    writeSettled(path.join(root, 'etc', 'hostname'), 'laptop\n');
    mkdirSync(proc);
    execFileSync('mount', ['-t', 'proc', 'proc', proc]);
    procMounted = true;

    const first = await canopySucceeds(home, 'backup', root, '--bucket', 'System', '--skip-check');
    expect(first).toContain(
      "skipped proc: the kernel's proc file system is mounted there, whose entries are not files: kept as an empty folder\n",
    );
    expect(first).toMatch(/^1 file \(/m);
    const again = await canopySucceeds(home, 'backup', root, '--bucket', 'System', '--skip-check');
    expect(again).toMatch(/^nothing changed since version /);

    const target = path.join(scratch, 'restored');
    await canopySucceeds(home, 'restore', '--bucket', 'System', '--to', target);
    expect(readFileSync(path.join(target, 'etc', 'hostname'), 'utf8')).toBe('laptop\n');
    expect(readdirSync(path.join(target, 'proc'))).toEqual([]);
  });
});
