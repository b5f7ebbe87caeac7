import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BackupLock, HomeLock } from '../../../main/state/index.ts';
import { whileLocked } from '../../../main/identity/secrets-file-lock.ts';

// A lock file holds nothing: one damaged on its disk ("file is not a database") is emptied and
// taken, rather than refusing every command that takes it.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-damaged-locks-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const garbage = 'not a database, and longer than a header would be: '.repeat(4);

describe('a damaged lock file', () => {
  it('is emptied and taken: the home lock, a backup lock, the secrets lock', () => {
    const home = path.join(scratch, 'home');
    const locks = path.join(home, 'locks');
    mkdirSync(locks, { recursive: true });
    writeFileSync(path.join(locks, 'home.lock'), garbage);
    writeFileSync(path.join(locks, 'backup-b1.lock'), garbage);
    const secretsLock = path.join(home, 'secrets.lock');
    writeFileSync(secretsLock, garbage);

    const homeLock = HomeLock.share(home);
    homeLock.release();
    const backupLock = BackupLock.tryAcquire(home, 'b1');
    expect(backupLock).not.toBeNull();
    // Taken, it is still a lock: a second taker is refused while the first holds it.
    expect(BackupLock.tryAcquire(home, 'b1')).toBeNull();
    backupLock?.release();
    expect(whileLocked(secretsLock, () => 'changed')).toBe('changed');
    for (const file of [path.join(locks, 'home.lock'), path.join(locks, 'backup-b1.lock')])
      expect(statSync(file).size).toBe(0);
    expect(readFileSync(secretsLock, 'utf8')).toBe('');
  });
});
