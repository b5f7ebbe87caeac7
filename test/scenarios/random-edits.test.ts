import { afterAll, describe, expect, it } from 'vitest';
import {
  chmodSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { seededRandom } from '../helpers/seeded-random.ts';
import { fingerprintTree, type Fingerprint } from '../helpers/tree-fingerprint.ts';

// A folder edited the way people edit folders, between backups: files written, rewritten,
// renamed, moved to other folders, deleted; folders renamed, moved and deleted; modes, times,
// symlinks and hard links changed; names that change kind (file, folder, symlink). Every version must restore as the folder was when it was
// backed up. The file index's shortcuts (a file unchanged by size, mtime and inode, a folder
// unchanged as a whole, a file found again after its folder moved) are what this exercises.
// What `canopy diff` tells between each version and the next must be what the edits changed.
// The edits are random from a fixed seed, so a failure repeats (EDIT_SEED=N tries another).

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-random-edits-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const { next: random, below, pick } = seededRandom(Number(process.env['EDIT_SEED'] ?? 20261126));

function bytesOf(size: number): Buffer {
  const bytes = Buffer.alloc(size);
  for (let at = 0; at < size; at++) bytes[at] = below(256);
  return bytes;
}

/** Sizes around the 1 MiB chunk, and small ones. */
const SIZES = [0, 1, 17, 4096, (1 << 20) - 1, 1 << 20, (1 << 20) + 1];
/** Names in both Unicode forms, with a space, a newline, a leading dot. */
const NAMES = ['a', 'ü', 'u\u0308', 'x y', 'line\nbreak', '.dot'];
const source = path.join(scratch, 'source');
const now = Math.floor(Date.now() / 1000);
let made = 0;

const at = (relative: string): string => path.join(source, relative);
const newName = (): string => `${pick(NAMES) ?? 'n'}${made++}`;
/** A time at least a day old: the file index trusts it, as it does a file edited long ago. */
const settled = (): number => now - 100_000 + below(90_000);

function entries(kind: 'file' | 'directory'): string[] {
  const found: string[] = [];
  const walk = (relative: string): void => {
    for (const name of readdirSync(at(relative))) {
      const child = relative === '' ? name : `${relative}/${name}`;
      const stat = lstatSync(at(child));
      if (stat.isDirectory()) {
        if (kind === 'directory') found.push(child);
        walk(child);
      } else if (stat.isFile() && kind === 'file') found.push(child);
    }
  };
  walk('');
  return found;
}
const folders = (): string[] => ['', ...entries('directory')];
const inFolder = (folder: string, name: string): string =>
  folder === '' ? name : `${folder}/${name}`;
const free = (relative: string): boolean => {
  try {
    lstatSync(at(relative));
    return false;
  } catch {
    return true;
  }
};

function writeFile(relative: string, size: number): void {
  writeFileSync(at(relative), bytesOf(size));
  const time = settled();
  utimesSync(at(relative), time, time);
}

/** One edit; false when there was nothing to edit. */
const EDITS: Array<() => boolean> = [
  () => {
    writeFile(inFolder(pick(folders()) ?? '', newName()), pick(SIZES) ?? 0);
    return true;
  },
  () => {
    const file = pick(entries('file'));
    if (file === undefined) return false;
    const before = lstatSync(at(file));
    writeFileSync(at(file), bytesOf(random() < 0.5 ? before.size : (pick(SIZES) ?? 0)));
    // Rewritten later than it was written before, as an editor does.
    const time = Math.floor(before.mtimeMs / 1000) + 1 + below(500);
    utimesSync(at(file), time, time);
    return true;
  },
  () => {
    const file = pick(entries('file'));
    if (file === undefined) return false;
    rmSync(at(file));
    return true;
  },
  () => {
    const file = pick(entries('file'));
    if (file === undefined) return false;
    renameSync(at(file), at(inFolder(path.posix.dirname(file).replace(/^\.$/, ''), newName())));
    return true;
  },
  () => {
    const file = pick(entries('file'));
    const to = inFolder(pick(folders()) ?? '', path.posix.basename(file ?? ''));
    if (file === undefined || !free(to)) return false;
    renameSync(at(file), at(to));
    return true;
  },
  () => {
    const folder = pick(entries('directory'));
    const into = pick(folders()) ?? '';
    if (folder === undefined || into === folder || into.startsWith(`${folder}/`)) return false;
    const to = inFolder(into, random() < 0.5 ? path.posix.basename(folder) : newName());
    if (!free(to)) return false;
    renameSync(at(folder), at(to));
    return true;
  },
  () => {
    const folder = pick(entries('directory'));
    if (folder === undefined || random() < 0.5) return false;
    rmSync(at(folder), { recursive: true });
    return true;
  },
  () => {
    const file = pick(entries('file'));
    if (file === undefined) return false;
    chmodSync(at(file), pick([0o644, 0o755, 0o600]) ?? 0o644);
    return true;
  },
  () => {
    symlinkSync(
      pick(['target', '../up', 'a/b']) ?? 'x',
      at(inFolder(pick(folders()) ?? '', newName())),
    );
    return true;
  },
  () => {
    const folder = inFolder(pick(folders()) ?? '', newName());
    mkdirSync(at(folder));
    for (let count = 1 + below(4); count > 0; count--)
      writeFile(inFolder(folder, newName()), pick(SIZES) ?? 0);
    return true;
  },
  () => {
    const file = pick(entries('file'));
    if (file === undefined) return false;
    const time = Math.floor(lstatSync(at(file)).mtimeMs / 1000) - 1 - below(500);
    utimesSync(at(file), time, time);
    return true;
  },
  () => {
    const file = pick(entries('file'));
    if (file === undefined) return false;
    linkSync(at(file), at(inFolder(pick(folders()) ?? '', newName())));
    return true;
  },
  // A name that changes kind: a file replaced by a folder of the same name, or a symlink.
  () => {
    const file = pick(entries('file'));
    if (file === undefined) return false;
    rmSync(at(file));
    if (random() < 0.5) {
      mkdirSync(at(file));
      writeFile(inFolder(file, newName()), pick(SIZES) ?? 0);
    } else symlinkSync('elsewhere', at(file));
    return true;
  },
  // A folder replaced by a file of the same name.
  () => {
    const folder = pick(entries('directory'));
    if (folder === undefined) return false;
    rmSync(at(folder), { recursive: true });
    writeFile(folder, pick(SIZES) ?? 0);
    return true;
  },
];

/** What `canopy diff` tells apart of an entry: its kind, bytes, mode, mtime, link target. */
interface DiffedEntry {
  readonly type: 'file' | 'directory' | 'symlink';
  readonly sha?: string;
  readonly mode: number;
  readonly mtimeNs: bigint;
  readonly target?: string;
}

/** Every entry under `root` by its path below it, the root itself as ''. */
function diffedEntries(root: string): Map<string, DiffedEntry> {
  const out = new Map<string, DiffedEntry>();
  const add = (relative: string): void => {
    const full = path.join(root, relative);
    const stats = lstatSync(full, { bigint: true });
    const common = { mode: Number(stats.mode & 0o7777n), mtimeNs: stats.mtimeNs };
    if (stats.isSymbolicLink()) {
      out.set(relative, { type: 'symlink', ...common, target: readlinkSync(full) });
    } else if (stats.isDirectory()) {
      out.set(relative, { type: 'directory', ...common });
      for (const name of readdirSync(full)) add(relative === '' ? name : `${relative}/${name}`);
    } else {
      const sha = createHash('sha256').update(readFileSync(full)).digest('hex');
      out.set(relative, { type: 'file', ...common, sha });
    }
  };
  add('');
  return out;
}

/** The changes from `before` to `after`, each as `<change> <path>`, as VersionDiffer names them. */
function expectedChanges(
  before: Map<string, DiffedEntry>,
  after: Map<string, DiffedEntry>,
): string[] {
  const changes: string[] = [];
  for (const relative of new Set([...before.keys(), ...after.keys()])) {
    const old = before.get(relative);
    const now = after.get(relative);
    let change: string | undefined;
    if (!old) change = 'added';
    else if (!now) change = 'removed';
    else if (old.type !== now.type) change = 'type';
    else if (old.sha !== now.sha || old.target !== now.target) change = 'modified';
    // A folder's mtime follows the names in it, which are told themselves.
    else if (old.mode !== now.mode || (now.type !== 'directory' && old.mtimeNs !== now.mtimeNs))
      change = 'metadata';
    if (change) changes.push(`${change} ${relative}`);
  }
  return changes.sort();
}

describe('random edits between backups', () => {
  it('restores every version as the folder was when it was backed up', async () => {
    mkdirSync(source);
    const home = path.join(scratch, 'home');
    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Edited', type: 'backup', storageClass: 'hot' });
      const versions: Array<{
        id: string;
        expected: Map<string, Fingerprint>;
        entries: Map<string, DiffedEntry>;
      }> = [];
      for (let round = 0; round < 12; round++) {
        for (let edits = round === 0 ? 20 : 1 + below(6); edits > 0; edits--) pick(EDITS)?.();
        const expected = fingerprintTree(source);
        const entries = diffedEntries(source);
        const backup = await engine.backup({ dir: source, bucket: 'Edited', allowEmpty: true });
        expect(backup.skipped).toEqual([]);
        versions.push({ id: backup.versionId, expected, entries });
      }
      // What changed from each version to the next, as `canopy diff` tells it, is what the
      // edits changed in the folder.
      for (let index = 1; index < versions.length; index++) {
        const [before, after] = [versions[index - 1], versions[index]];
        if (!before || !after) continue;
        const compared = await engine.compare({ bucket: 'Edited', from: before.id, to: after.id });
        expect(
          compared.changes.map((change) => `${change.change} ${change.path}`).sort(),
          `from version ${index - 1} to ${index}`,
        ).toEqual(expectedChanges(before.entries, after.entries));
      }
      for (const [index, version] of versions.entries()) {
        const target = path.join(scratch, `restored-${index}`);
        await engine.restore({
          bucket: 'Edited',
          version: version.id,
          to: target,
          overwrite: false,
        });
        expect(fingerprintTree(target), `version ${index}`).toEqual(version.expected);
      }
      const again = await engine.backup({ dir: source, bucket: 'Edited', allowEmpty: true });
      expect(again).toMatchObject({ unchanged: true, bytesRead: 0 });
    } finally {
      await engine.close();
    }
  });
});
