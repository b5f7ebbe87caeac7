import { afterAll, describe, expect, it } from 'vitest';
import {
  chmodSync,
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canopySucceeds, loginWithBucket } from '../helpers/canopy-cli.ts';
import { nobodyEngine } from '../helpers/nobody-engine.ts';

// A version keeps modes but no owners, so a restore makes every file its restorer's. Run as
// root, a file marked set-user-ID (a program its user let run as themselves, or one a hostile
// server marked) would then run as root for anyone who may execute it: such a restore drops the
// set-user-ID and set-group-ID bits of files, and names each file. A user restoring their own
// files keeps them: they could set them themselves. A folder's set-group-ID bit only makes what
// is created in it take the folder's group, and stays.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-set-id-'));
// Open to `nobody`, who restores into a home of its own below it.
chmodSync(scratch, 0o755);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A file's or folder's permission bits, with set-user-ID, set-group-ID and sticky. */
const modeOf = (file: string): number => lstatSync(file).mode & 0o7777;

/** A source with files and a folder of each kind of mode, settled an hour ago. */
function sourceWithSetIdBits(source: string, owner?: number): void {
  mkdirSync(path.join(source, 'shared'), { recursive: true });
  const files: Array<[string, number]> = [
    ['tool', 0o4755],
    ['grouped', 0o2750],
    ['plain', 0o755],
    ['shared/note.txt', 0o644],
  ];
  const anHourAgo = new Date(Date.now() - 3_600_000);
  for (const [name, mode] of files) {
    const file = path.join(source, name);
    writeFileSync(file, `#!/bin/sh\necho ${name}\n`);
    if (owner !== undefined) chownSync(file, owner, owner);
    // After the chown, which clears the set-ID bits.
    chmodSync(file, mode);
    utimesSync(file, anHourAgo, anHourAgo);
  }
  if (owner !== undefined) {
    chownSync(path.join(source, 'shared'), owner, owner);
    chownSync(source, owner, owner);
  }
  chmodSync(path.join(source, 'shared'), 0o2775);
  chmodSync(source, 0o755);
}

describe('set-user-ID and set-group-ID bits', () => {
  it('restored as root, files lose them and are named; a folder keeps its own', async () => {
    expect(process.getuid?.()).toBe(0);
    const home = path.join(scratch, 'root-home');
    await loginWithBucket(home, path.join(scratch, 'root-data'), 'Tools');
    const source = path.join(scratch, 'root-source');
    sourceWithSetIdBits(source);
    await canopySucceeds(home, 'backup', source, '--bucket', 'Tools', '--skip-check');
    // The version holds the modes as they were.
    const listed = await canopySucceeds(home, 'ls', '--bucket', 'Tools', '--json');
    const modes = Object.fromEntries(
      (JSON.parse(listed) as Array<{ name: string; mode: number }>).map((entry) => [
        entry.name,
        entry.mode,
      ]),
    );
    expect(modes).toMatchObject({ tool: 0o4755, grouped: 0o2750, plain: 0o755 });

    const target = path.join(scratch, 'root-restored');
    const printed = await canopySucceeds(home, 'restore', '--bucket', 'Tools', '--to', target);
    expect(
      ['tool', 'grouped', 'plain', 'shared', 'shared/note.txt'].map((name) =>
        modeOf(path.join(target, name)),
      ),
    ).toEqual([0o755, 0o750, 0o755, 0o2775, 0o644]);
    expect(readFileSync(path.join(target, 'tool'), 'utf8')).toBe('#!/bin/sh\necho tool\n');
    const told = printed.split('\n').filter((line) => line.includes('set-user-ID'));
    expect(told.sort()).toEqual(
      ['grouped', 'tool'].map(
        (name) =>
          `restored ${name} without its set-user-ID or set-group-ID bit: Canopy keeps no owners, and restored by root it would run as whoever the restore made its owner (chmod u+s or g+s gives it back)`,
      ),
    );
  });

  it('restored by the user who owns them, files keep them', () => {
    const home = path.join(scratch, 'nobody-home');
    const asNobody = nobodyEngine(home);
    expect(asNobody(['login', 'Tools']).stderr).toBe('');
    const source = path.join(home, 'source');
    sourceWithSetIdBits(source, 65534);
    const backup = asNobody(['backup', source, 'Tools']);
    expect(backup.stderr).toBe('');
    expect(backup.status).toBe(0);
    const target = path.join(home, 'restored');
    const restore = asNobody(['restore', 'Tools', target]);
    expect(restore.stderr).toBe('');
    expect(restore.status).toBe(0);
    expect(
      ['tool', 'grouped', 'plain', 'shared'].map((name) => modeOf(path.join(target, name))),
    ).toEqual([0o4755, 0o2750, 0o755, 0o2775]);
    expect(lstatSync(path.join(target, 'tool')).uid).toBe(65534);
  });
});
