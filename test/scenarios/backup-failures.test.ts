import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy } from '../helpers/canopy-cli.ts';

// Failures a user can hit during a backup, with the real CLI: an unreadable file (as `nobody`,
// since root reads anything) and a full disk while staging shards (a small tmpfs). Each gets
// a clear message, loses nothing, and the next run succeeds.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-failures-'));
chmodSync(scratch, 0o755);
const mounts: string[] = [];
afterAll(() => {
  for (const mount of mounts) spawnSync('umount', [mount]);
  rmSync(scratch, { recursive: true, force: true });
});

const fileStore = { CANOPY_SECRET_STORE: 'file' };

describe('backup failures', () => {
  it('skips an unreadable file with a reason, backs up the rest, and picks it up once readable', () => {
    const source = path.join(scratch, 'source');
    mkdirSync(source);
    writeFileSync(path.join(source, 'readable.txt'), 'fine');
    writeFileSync(path.join(source, 'secret.txt'), 'not for nobody');
    chmodSync(source, 0o755);
    chmodSync(path.join(source, 'readable.txt'), 0o644);
    chmodSync(path.join(source, 'secret.txt'), 0o600);
    const home = path.join(scratch, 'nobody-home');
    mkdirSync(home);
    chownSync(home, 65534, 65534);
    const helper = path.resolve('test/helpers/engine-as-nobody.ts');
    const asNobody = (args: string[]) =>
      spawnSync(process.execPath, ['--import', 'tsx', helper, home, ...args], {
        encoding: 'utf8',
        env: { ...process.env, HOME: home },
      });
    const login = asNobody(['login', 'Docs']);
    expect(login.stderr).toBe('');
    expect(login.status).toBe(0);
    const first = asNobody(['backup', source, 'Docs']);
    expect(first.status).toBe(0);
    const firstResult = JSON.parse(first.stdout) as {
      files: number;
      skipped: Array<{ path: string; reason: string }>;
    };
    expect(firstResult.files).toBe(1);
    expect(firstResult.skipped).toEqual([{ path: 'secret.txt', reason: 'permission denied' }]);
    chmodSync(path.join(source, 'secret.txt'), 0o644);
    const second = JSON.parse(asNobody(['backup', source, 'Docs']).stdout) as {
      files: number;
      skipped: unknown[];
    };
    expect(second).toMatchObject({ files: 2, skipped: [] });
    const target = path.join(home, 'restored');
    expect(asNobody(['restore', 'Docs', target]).status).toBe(0);
    expect(readFileSync(path.join(target, 'secret.txt'), 'utf8')).toBe('not for nobody');
  });

  it('reports a full disk while staging shards clearly, keeps nothing half-done, and succeeds once space is free', async () => {
    const source = path.join(scratch, 'big-source');
    mkdirSync(source);
    for (let i = 0; i < 3; i += 1)
      writeFileSync(path.join(source, `part-${i}.bin`), randomBytes(4 << 20));
    const home = path.join(scratch, 'tmpfs-home');
    mkdirSync(home);
    const localData = path.join(scratch, 'local-data');
    expect(
      (await runCanopy(home, ['login', '--local', '--data', localData], fileStore)).status,
    ).toBe(0);
    expect((await runCanopy(home, ['buckets', 'create', 'Big'], fileStore)).status).toBe(0);
    // Staging lives in the Canopy home; give it a 6 MiB tmpfs for 12 MiB of data.
    const staging = path.join(home, 'staging');
    mkdirSync(staging);
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=6m', 'tmpfs', staging], {
      encoding: 'utf8',
    });
    expect(mounted.status, mounted.stderr).toBe(0);
    mounts.push(staging);
    const full = await runCanopy(home, ['backup', source, '--bucket', 'Big'], fileStore);
    expect(full.status).toBe(1);
    expect(full.stderr).toBe(
      `canopy: not enough free space in ${staging} to stage the backup; free some space and run it again\n`,
    );
    expect((await runCanopy(home, ['versions', '--bucket', 'Big'], fileStore)).stdout).toBe(
      'no versions yet\n',
    );
    expect(readdirSync(staging)).toEqual([]);
    spawnSync('umount', [staging]);
    mounts.pop();
    const ok = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Big', '--progress'],
      fileStore,
    );
    expect(ok.status).toBe(0);
    expect(ok.stdout).toContain(`3 files (0 unchanged, not read again), ${12 << 20} bytes scanned`);
    // Each phase's last progress line shows it complete.
    expect(ok.stderr).toMatch(/^reading: 3\/3 files, 13 MB of 13 MB, /m);
    expect(ok.stderr).toMatch(/^uploading: 3\/3 files, 13 MB of 13 MB, /m);
  });

  it('reports a full disk while restoring clearly, and leaves no half-written file', async () => {
    const source = path.join(scratch, 'restore-source');
    // A large file first, then small ones that wait for its leaves to be taken: when the disk
    // fills under it, they must fail too rather than wait forever.
    mkdirSync(path.join(source, 'b-small'), { recursive: true });
    writeFileSync(path.join(source, 'a-large.bin'), randomBytes(100 << 20));
    for (let i = 0; i < 30; i += 1)
      writeFileSync(path.join(source, 'b-small', `note-${i}.txt`), randomBytes(2000));
    const home = path.join(scratch, 'restore-home');
    mkdirSync(home);
    const localData = path.join(scratch, 'restore-data');
    expect(
      (await runCanopy(home, ['login', '--local', '--data', localData], fileStore)).status,
    ).toBe(0);
    expect((await runCanopy(home, ['buckets', 'create', 'Docs'], fileStore)).status).toBe(0);
    const backup = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], fileStore);
    expect(backup.status).toBe(0);
    const target = path.join(scratch, 'small-disk');
    mkdirSync(target);
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', target], {
      encoding: 'utf8',
    });
    expect(mounted.status, mounted.stderr).toBe(0);
    mounts.push(target);
    const full = await runCanopy(home, ['restore', '--bucket', 'Docs', '--to', target], fileStore);
    expect(full.status).toBe(1);
    expect(full.stderr).toBe(
      `canopy: not enough free space in ${target} to restore; free some space and run it again\n`,
    );
    const leftovers = readdirSync(target, { recursive: true }).map(String);
    expect(leftovers.filter((name) => name.includes('.canopy-'))).toEqual([]);
    expect(leftovers).not.toContain('a-large.bin');
  });
});
