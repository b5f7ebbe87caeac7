import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canopySucceeds, localHomeWithBucket } from '../helpers/canopy-cli.ts';
import { mountRefusingOwners, type MountedDisk } from '../helpers/limited-disks.ts';

// A version keeps no owners, so what root restores would all be root's: an administrator
// restoring a user's lost folder into their home would leave them files they cannot change. Run
// as root, a restore gives each file, folder and link it makes the owner and group of the folder
// it goes into; what was there keeps its own, and a file replaced passes its owner on to the
// copy that replaces it. (The tests run as root.)

const NOBODY = 65534;
const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-owners-'));
let home: string;
let disk: MountedDisk | undefined;

/** Every item under `dir` (itself too), with its owner and group, by its path below `dir`. */
function ownersUnder(dir: string): Record<string, string> {
  const owners: Record<string, string> = {};
  for (const name of ['', ...readdirSync(dir, { recursive: true, encoding: 'utf8' })]) {
    const stats = lstatSync(path.join(dir, name));
    owners[name] = `${stats.uid}:${stats.gid}`;
  }
  return owners;
}

beforeAll(async () => {
  const made = await localHomeWithBucket(path.join(scratch, 'device'), 'Docs');
  home = made.home;
  mkdirSync(path.join(made.source, 'letters'));
  writeFileSync(path.join(made.source, 'letters', 'to-ann.txt'), 'dear Ann\n');
  writeFileSync(path.join(made.source, 'notes.txt'), 'notes\n');
  symlinkSync('letters/to-ann.txt', path.join(made.source, 'latest'));
  await canopySucceeds(home, 'backup', made.source, '--bucket', 'Docs', '--skip-check');
}, 60_000);

afterAll(() => {
  disk?.unmount();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a restore run as root', () => {
  it("makes what it restores into a user's folder that user's", async () => {
    // Ann's home: hers, and what the restore makes in it.
    const annHome = path.join(scratch, 'ann');
    mkdirSync(annHome);
    chownSync(annHome, NOBODY, NOBODY);
    const target = path.join(annHome, 'Documents', 'restored');
    const said = await canopySucceeds(home, 'restore', '--bucket', 'Docs', '--to', target);
    expect(said).toContain(
      "6 files, folders and links restored for another user take the owner and group of the folder they went into (or of the file replaced), not root's: Canopy keeps no owners\n",
    );
    expect(ownersUnder(annHome)).toEqual({
      '': '65534:65534',
      Documents: '65534:65534',
      'Documents/restored': '65534:65534',
      'Documents/restored/letters': '65534:65534',
      'Documents/restored/letters/to-ann.txt': '65534:65534',
      'Documents/restored/notes.txt': '65534:65534',
      'Documents/restored/latest': '65534:65534',
    });
    expect(readFileSync(path.join(target, 'latest'), 'utf8')).toBe('dear Ann\n');
  });

  it("leaves what it restores into root's folders root's, and what was there its owner's", async () => {
    const target = path.join(scratch, 'root-target');
    // A folder of the version that is there already, and Ann's.
    mkdirSync(path.join(target, 'letters'), { recursive: true });
    chownSync(path.join(target, 'letters'), NOBODY, NOBODY);
    const said = await canopySucceeds(home, 'restore', '--bucket', 'Docs', '--to', target);
    expect(said).toContain(
      '1 file, folder or link restored for another user takes the owner and group of the folder it went into',
    );
    expect(ownersUnder(target)).toEqual({
      '': '0:0',
      letters: '65534:65534',
      'letters/to-ann.txt': '65534:65534',
      'notes.txt': '0:0',
      latest: '0:0',
    });
  });

  it('with --overwrite, gives a file it replaces the owner that file had', async () => {
    const target = path.join(scratch, 'overwritten');
    mkdirSync(target);
    // Ann's copy, in root's folder, changed since the backup.
    writeFileSync(path.join(target, 'notes.txt'), 'changed notes\n');
    chownSync(path.join(target, 'notes.txt'), NOBODY, NOBODY);
    const said = await canopySucceeds(
      home,
      ...['restore', '--bucket', 'Docs', '--to', target, '--overwrite'],
    );
    expect(said).toContain('1 file, folder or link restored for another user takes');
    expect(readFileSync(path.join(target, 'notes.txt'), 'utf8')).toBe('notes\n');
    expect(ownersUnder(target)).toEqual({
      '': '0:0',
      letters: '0:0',
      'letters/to-ann.txt': '0:0',
      'notes.txt': '65534:65534',
      latest: '0:0',
    });
  });

  it('restores onto a disk that keeps owners of its own, as they are', async () => {
    disk = mountRefusingOwners(path.join(scratch, 'stick'), NOBODY);
    const target = path.join(disk.dir, 'restored');
    const said = await canopySucceeds(home, 'restore', '--bucket', 'Docs', '--to', target);
    expect(said).not.toContain('restored for another user');
    expect(Object.values(ownersUnder(target))).toEqual(Array(5).fill('65534:65534'));
    expect(readFileSync(path.join(target, 'notes.txt'), 'utf8')).toBe('notes\n');
  });
});
