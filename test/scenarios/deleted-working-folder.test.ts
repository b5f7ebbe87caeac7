import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import {
  loginWithBucket,
  runCanopy,
  runCanopyInDeletedFolder,
  type CliResult,
} from '../helpers/canopy-cli.ts';

// A command typed in a shell whose folder was deleted meanwhile (a build folder cleaned, a
// download folder emptied by another window). Node starts no worker thread there, and the
// backup reads and hashes large files on one: a backup that met that failure as each file's
// own read ("deleted before it was read") would leave every such file out of the version. Full
// paths work as anywhere; a relative one is refused, since there is nowhere it goes from.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-deleted-cwd-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const env = { CANOPY_SECRET_STORE: 'file' };
const MiB = 1024 * 1024;
/** Larger than a chunk: read and hashed on a worker thread. */
const large = randomBytes(3 * MiB + 7);
/** A folder each command is typed in, deleted before it starts. */
let typedIn = 0;

function inDeletedFolder(...args: string[]): Promise<CliResult> {
  typedIn += 1;
  return runCanopyInDeletedFolder(path.join(scratch, `gone-${typedIn}`), home, args, env);
}

beforeAll(async () => {
  mkdirSync(source, { recursive: true });
  writeFileSync(path.join(source, 'large.bin'), large);
  writeFileSync(path.join(source, 'notes.txt'), 'a few words');
  await loginWithBucket(home, path.join(scratch, 'data'), 'Gone');
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a command typed in a folder deleted under the shell', () => {
  it('backs up and restores by full paths, every file read, and refuses relative ones', async () => {
    const relative = await inDeletedFolder('backup', '.', '--bucket', 'Gone');
    expect(relative.status, relative.stderr).toBe(2);
    expect(relative.stderr).toBe(
      'canopy: . goes from the folder this command was typed in, which was deleted: give its full path, or run the command in a folder that exists\n',
    );

    const backup = await inDeletedFolder('backup', source, '--bucket', 'Gone');
    expect(backup.status, backup.stderr).toBe(0);
    expect(backup.stdout).toMatch(/^2 files \(0 unchanged, not read again\)/m);
    expect(backup.stderr).not.toMatch(/skipped/);

    // A path in the version typed there goes from the version's top.
    const listed = await inDeletedFolder('ls', 'large.bin', '--bucket', 'Gone');
    expect(listed.status, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(` ${large.length} .* large\\.bin\\n$`));

    const intoRelative = await inDeletedFolder('restore', '--bucket', 'Gone', '--to', 'back');
    expect(intoRelative.status).toBe(2);
    expect(intoRelative.stderr).toMatch(
      /^canopy: back goes from the folder this command was typed in, which was deleted/,
    );

    const target = path.join(scratch, 'back');
    const restored = await inDeletedFolder('restore', '--bucket', 'Gone', '--to', target);
    expect(restored.status, restored.stderr).toBe(0);
    expect(readFileSync(path.join(target, 'large.bin')).equals(large)).toBe(true);
    expect(readFileSync(path.join(target, 'notes.txt'), 'utf8')).toBe('a few words');
  });

  it('is refused a relative data folder at login, and nothing is enrolled', async () => {
    const otherHome = path.join(scratch, 'other-home');
    typedIn += 1;
    const login = await runCanopyInDeletedFolder(
      path.join(scratch, `gone-${typedIn}`),
      otherHome,
      ['login', '--local', '--data', 'backups'],
      env,
    );
    expect(login.status).toBe(2);
    expect(login.stderr).toMatch(/^canopy: backups goes from the folder this command was typed in/);
    const whoami = await runCanopy(otherHome, ['whoami'], env);
    expect(whoami.status).toBe(1);
  });
});

describe('an engine whose process runs in a deleted folder', () => {
  it('fails the backup with the reason, rather than leave out the files it could not hash', async () => {
    const engineHome = path.join(scratch, 'engine-home');
    const engine = createEngine({
      home: engineHome,
      secrets: new FileSecretStore(engineHome),
      startLocalService,
    });
    const before = process.cwd();
    try {
      await engine.loginLocal({ dataDir: path.join(scratch, 'engine-data') });
      await engine.createBucket({ name: 'Threads', type: 'backup', storageClass: 'hot' });
      const gone = path.join(scratch, 'engine-gone');
      mkdirSync(gone);
      process.chdir(gone);
      rmdirSync(gone);
      let failure: unknown;
      try {
        await engine.backup({ dir: source, bucket: 'Threads' });
      } catch (error) {
        failure = error;
      } finally {
        process.chdir(before);
      }
      expect(failure).toBeInstanceOf(Error);
      expect((failure as Error).message).toMatch(
        /^the thread reading and hashing chunks stopped: /,
      );
      expect(await engine.listVersions({ bucket: 'Threads' })).toEqual([]);

      // In a folder that exists, the same backup holds both files.
      const stored = await engine.backup({ dir: source, bucket: 'Threads' });
      expect(stored).toMatchObject({ files: 2, skipped: [] });
    } finally {
      process.chdir(before);
      await engine.close();
    }
  });
});
