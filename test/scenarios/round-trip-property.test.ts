import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import ignore from 'ignore';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { restoredMicroseconds } from '../../main/protocol/restored-time.ts';
import { fileTime } from '../../main/restore/file-time.ts';
import { DEFAULT_EXCLUDES } from '../../main/scanner/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { fingerprintTree, type Fingerprint } from '../helpers/tree-fingerprint.ts';

// Round trips of trees fast-check makes up (reliability.md R31): files of sizes at and around
// the 1 MiB chunk, empty ones, the same bytes in several files, runs of zeros, every kind of
// mode, times from 1901 to 2100, names in both Unicode forms and with newlines, tabs,
// backslashes, leading dashes, trailing spaces and dots, 255 bytes long, names Canopy's default
// rules exclude, empty and nested folders, symlinks dangling and absolute. Each tree is backed
// up to a bucket of its own and restored: what comes back is the tree as made, but what the
// default rules exclude, each file's set-user-ID and set-group-ID bits when restored as root,
// and each time to the microsecond (main/restore/file-time.ts). A failure is shrunk to a
// smallest tree that fails, and fast-check prints it with the seed to run it again
// (ROUND_TRIP_SEED, and ROUND_TRIP_RUNS for more trees than CI's).

const MiB = 1 << 20;
const RUNS = Number(process.env['ROUND_TRIP_RUNS'] ?? 200);
/** Trees restored into a folder holding another made-up tree: each two restores and two plans. */
const INTO_TREE_RUNS = Number(process.env['ROUND_TRIP_INTO_TREE_RUNS'] ?? 60);
const SEED = Number(process.env['ROUND_TRIP_SEED'] ?? 20261128);

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-round-trip-'));
let engine: Engine;
beforeAll(async () => {
  const home = path.join(scratch, 'home');
  engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
  await engine.loginLocal({});
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

interface FileSpec {
  readonly kind: 'file';
  readonly name: string;
  readonly size: number;
  /** Bytes from this seed; the same seed and size make the same bytes. */
  readonly seed: number;
  readonly zeros: boolean;
  readonly mode: number;
  readonly mtimeNs: bigint;
}
interface SymlinkSpec {
  readonly kind: 'symlink';
  readonly name: string;
  readonly target: string;
  readonly mtimeNs: bigint;
}
interface FolderSpec {
  readonly kind: 'folder';
  readonly name: string;
  readonly mode: number;
  readonly mtimeNs: bigint;
  readonly entries: readonly EntrySpec[];
}
type EntrySpec = FileSpec | SymlinkSpec | FolderSpec;

const NAMES = [
  'a',
  'b',
  'B',
  'caf\u00e9',
  'cafe\u0301',
  '日本語のファイル',
  '🙂 smile',
  'שלום',
  'line\nbreak',
  'tab\there',
  'back\\slash',
  '-dash',
  ' leading space',
  'trailing space ',
  'trailing dot.',
  '%41 not decoded',
  'n'.repeat(255),
  '\u00e9'.repeat(127),
  // Excluded by Canopy's defaults; `.cache` only as a folder.
  'draft.tmp',
  '~$report.docx',
  '.DS_Store',
  'notes.txt~',
  '.cache',
  '.hidden',
];
const SYMLINK_TARGETS = ['a', '../b', '/etc/hostname', 'no/such/thing', 'caf\u00e9', 'line\nbreak'];
const FILE_MODES = [0o644, 0o600, 0o755, 0o700, 0o444, 0o400, 0o640, 0o4755, 0o2750, 0o6711];
const FOLDER_MODES = [0o755, 0o700, 0o750, 0o2775, 0o1777, 0o555];
/**
 * From 1901-12-13 20:45:54 UTC to 2100, to the nanosecond: ext4 here holds no time before
 * 2^31 seconds ahead of 1970, and none with a fraction in the second after it.
 */
const mtimeNs = fc.bigInt(-2_147_483_646_000_000_000n, 4_102_444_800_000_000_000n);
const size = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 5000 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, 1, MiB - 1, MiB, MiB + 1, 2 * MiB + 1) },
);

const file = fc.record({
  kind: fc.constant('file' as const),
  name: fc.constantFrom(...NAMES),
  size,
  seed: fc.integer({ min: 0, max: 3 }),
  zeros: fc.boolean(),
  mode: fc.constantFrom(...FILE_MODES),
  mtimeNs,
});
const symlink = fc.record({
  kind: fc.constant('symlink' as const),
  name: fc.constantFrom(...NAMES),
  target: fc.constantFrom(...SYMLINK_TARGETS),
  mtimeNs,
});
/** Symbolic links in a target made up to restore into: none leads out of the scratch folder. */
const targetSymlink = fc.record({
  kind: fc.constant('symlink' as const),
  name: fc.constantFrom(...NAMES),
  target: fc.constantFrom(...SYMLINK_TARGETS.filter((target) => !path.isAbsolute(target))),
  mtimeNs,
});
/** The entries of a made-up folder, its symbolic links made by `link`. */
function entriesWith(link: fc.Arbitrary<SymlinkSpec>): fc.Arbitrary<EntrySpec[]> {
  return fc.letrec<{ entry: EntrySpec; folder: FolderSpec; entries: EntrySpec[] }>((tie) => ({
    entry: fc.oneof(
      { maxDepth: 3, depthSize: 'small', withCrossShrink: true },
      file,
      link,
      tie('folder'),
    ),
    folder: fc.record({
      kind: fc.constant('folder' as const),
      name: fc.constantFrom(...NAMES),
      mode: fc.constantFrom(...FOLDER_MODES),
      mtimeNs,
      entries: tie('entries'),
    }),
    entries: fc.uniqueArray(tie('entry'), { selector: (entry) => entry.name, maxLength: 5 }),
  })).entries;
}
const entries = entriesWith(symlink);
const targetEntries = entriesWith(targetSymlink);

/** `size` bytes from `seed` (xorshift32), or zeros. */
function bytesOf(spec: FileSpec): Buffer {
  const bytes = Buffer.alloc(spec.size);
  if (spec.zeros) return bytes;
  let state = (spec.seed + 1) * 0x9e3779b9;
  for (let at = 0; at < bytes.length; at += 1) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    bytes[at] = state & 0xff;
  }
  return bytes;
}

/** Makes `entries` in the folder `dir`, each folder's mode and time set once it is filled. */
function makeTree(dir: string, specs: readonly EntrySpec[]): void {
  for (const spec of specs) {
    const at = path.join(dir, spec.name);
    const time = fileTime(spec.mtimeNs);
    switch (spec.kind) {
      case 'file':
        writeFileSync(at, bytesOf(spec));
        chmodSync(at, spec.mode);
        utimesSync(at, time, time);
        break;
      case 'symlink':
        symlinkSync(spec.target, at);
        lutimesSync(at, time, time);
        break;
      case 'folder':
        mkdirSync(at);
        makeTree(at, spec.entries);
        chmodSync(at, spec.mode);
        utimesSync(at, time, time);
        break;
    }
  }
}

/**
 * What a restore must give back of the source folder as the backup found it (`source`, as
 * fingerprintTree tells it): all but what the default rules exclude, and files without their
 * set-user-ID and set-group-ID bits, restored as root.
 */
function expectedOf(source: ReadonlyMap<string, Fingerprint>): Map<string, Fingerprint> {
  const rules = ignore().add([...DEFAULT_EXCLUDES]);
  const excluded = (relative: string, print: Fingerprint): boolean =>
    rules.ignores(print.type === 'dir' ? `${relative}/` : relative);
  const expected = new Map<string, Fingerprint>();
  for (const [relative, print] of source) {
    const parts = relative.split('/');
    const underExcluded = parts
      .slice(0, -1)
      .some((_, index) => rules.ignores(`${parts.slice(0, index + 1).join('/')}/`));
    if (underExcluded || excluded(relative, print)) continue;
    expected.set(
      relative,
      print.type === 'file' ? { ...print, mode: (print.mode ?? 0) & ~0o6000 } : print,
    );
  }
  return expected;
}

/** The files `specs` make, and their bytes. */
function totalsOf(specs: readonly EntrySpec[]): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  for (const spec of specs) {
    if (spec.kind === 'file') {
      files += 1;
      bytes += spec.size;
    } else if (spec.kind === 'folder') {
      const inner = totalsOf(spec.entries);
      files += inner.files;
      bytes += inner.bytes;
    }
  }
  return { files, bytes };
}

/** What fingerprintTree tells of the folder `specs` make. */
function madeOf(specs: readonly EntrySpec[], folder = '', made = new Map<string, Fingerprint>()) {
  for (const spec of specs) {
    const relative = folder === '' ? spec.name : `${folder}/${spec.name}`;
    const mtime = Number(restoredMicroseconds(spec.mtimeNs));
    if (spec.kind === 'file') {
      const sha = createHash('sha256').update(bytesOf(spec)).digest('hex');
      made.set(relative, { type: 'file', sha, mode: spec.mode, mtime });
    } else if (spec.kind === 'symlink') {
      made.set(relative, { type: 'symlink', target: spec.target, mtime });
    } else {
      made.set(relative, { type: 'dir', mode: spec.mode, mtime });
      madeOf(spec.entries, relative, made);
    }
  }
  return made;
}

describe('round trips of made-up trees', () => {
  it(`restores ${RUNS} trees as they were backed up, but for what the rules exclude`, async () => {
    expect(process.getuid?.()).toBe(0);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(entries, async (tree) => {
        run += 1;
        const source = path.join(scratch, 'source');
        const target = path.join(scratch, 'restored');
        rmSync(source, { recursive: true, force: true });
        rmSync(target, { recursive: true, force: true });
        mkdirSync(source);
        makeTree(source, tree);
        const bucket = `tree-${run}`;
        await engine.createBucket({ name: bucket, type: 'backup', storageClass: 'hot' });
        // Its dry run tells what it backs up, and what the rules leave out: the rest of the tree.
        const plan = await engine.planBackup({ dir: source, bucket });
        const backup = await engine.backup({ dir: source, bucket, allowEmpty: true });
        expect(backup.skipped).toEqual([]);
        expect({ files: plan.files, bytes: plan.bytes, skipped: plan.skipped }).toEqual({
          files: backup.files,
          bytes: backup.bytesScanned,
          skipped: [],
        });
        const left = plan.excluded.reduce(
          (sum, item) => ({ files: sum.files + item.files, bytes: sum.bytes + item.bytes }),
          { files: plan.files, bytes: plan.bytes },
        );
        expect(left).toEqual(totalsOf(tree));
        const found = fingerprintTree(source);
        expect(found).toEqual(madeOf(tree));
        const expected = expectedOf(found);
        for (const item of plan.excluded) expect(expected.has(item.path)).toBe(false);
        const restored = await engine.restore({ bucket, to: target, overwrite: false });
        expect(fingerprintTree(target)).toEqual(expected);
        expect(restored.files).toBe(
          [...expected.values()].filter((print) => print.type === 'file').length,
        );
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: false },
    );
    // About a third of a second a tree here, more beside the other tests.
  }, 900_000);
});

let pairsMade = 0;

/**
 * `tree` made and backed up to a bucket of its own, and `there` made in the folder `targetName`
 * to restore it into: the bucket's name and the target's path.
 */
async function backedUpBeside(
  tree: readonly EntrySpec[],
  there: readonly EntrySpec[],
  targetName: string,
): Promise<{ bucket: string; target: string }> {
  pairsMade += 1;
  const source = path.join(scratch, 'source');
  const target = path.join(scratch, targetName);
  for (const dir of [source, target]) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
  }
  makeTree(source, tree);
  makeTree(target, there);
  const bucket = `${targetName}-${pairsMade}`;
  await engine.createBucket({ name: bucket, type: 'backup', storageClass: 'hot' });
  await engine.backup({ dir: source, bucket, allowEmpty: true });
  return { bucket, target };
}

/** The files and links of a fingerprinted tree, which a restore without --overwrite leaves. */
function filesAndLinksOf(tree: ReadonlyMap<string, Fingerprint>): Map<string, Fingerprint> {
  return new Map([...tree].filter(([, print]) => print.type !== 'dir'));
}

describe('restores into a folder holding another made-up tree', () => {
  it(`does what its dry run tells, keeps all that was there, and run again writes nothing: ${INTO_TREE_RUNS} pairs of trees`, async () => {
    await fc.assert(
      fc.asyncProperty(entries, targetEntries, async (tree, there) => {
        const { bucket, target } = await backedUpBeside(tree, there, 'into-tree');
        const kept = filesAndLinksOf(fingerprintTree(target));

        const plan = await engine.planRestore({ bucket, to: target, overwrite: false });
        const restored = await engine.restore({ bucket, to: target, overwrite: false });
        const told = (done: typeof plan | typeof restored) => ({
          files: done.files,
          bytes: done.bytes,
          directories: done.directories,
          symlinks: done.symlinks,
          alreadyThere: done.alreadyThere,
          restoredBefore: done.restoredBefore,
        });
        expect(told(restored)).toEqual(told(plan));
        expect(restored.notRestored).toEqual([]);
        expect(restored.restoredBeside.map((item) => item.path).sort()).toEqual(
          [...plan.beside].sort(),
        );
        // Nothing that was there is replaced or lost.
        const after = fingerprintTree(target);
        for (const [relative, print] of kept) expect(after.get(relative)).toEqual(print);

        // Run again, it finds all of the version there, under its names or beside them.
        const planAgain = await engine.planRestore({ bucket, to: target, overwrite: false });
        const again = await engine.restore({ bucket, to: target, overwrite: false });
        expect(told(again)).toEqual(told(planAgain));
        expect(again).toMatchObject({ files: 0, directories: 0, symlinks: 0 });
        expect(fingerprintTree(target)).toEqual(after);
      }),
      { numRuns: INTO_TREE_RUNS, seed: SEED, endOnFailure: false },
    );
  }, 900_000);

  it(`with --overwrite does what its dry run tells, and never replaces a folder: ${INTO_TREE_RUNS} pairs of trees`, async () => {
    await fc.assert(
      fc.asyncProperty(entries, targetEntries, async (tree, there) => {
        const { bucket, target } = await backedUpBeside(tree, there, 'over-tree');
        const folders = [...fingerprintTree(target)].filter(([, print]) => print.type === 'dir');

        const plan = await engine.planRestore({ bucket, to: target, overwrite: true });
        const restored = await engine.restore({ bucket, to: target, overwrite: true });
        expect({
          files: restored.files,
          bytes: restored.bytes,
          symlinks: restored.symlinks,
          beside: restored.restoredBeside.map((item) => item.path).sort(),
        }).toEqual({
          files: plan.files,
          bytes: plan.bytes,
          symlinks: plan.symlinks,
          beside: [...plan.beside].sort(),
        });
        expect(restored.notRestored).toEqual([]);
        const after = fingerprintTree(target);
        for (const [relative] of folders) expect(after.get(relative)?.type).toBe('dir');
      }),
      { numRuns: INTO_TREE_RUNS, seed: SEED, endOnFailure: false },
    );
  }, 900_000);
});

/** A change a user makes to a folder between two backups, at the `pick`th place it can. */
interface EditSpec {
  readonly kind:
    | 'rewrite-same-size-and-time'
    | 'touch'
    | 'chmod'
    | 'delete'
    | 'rename'
    | 'move'
    | 'add'
    | 'file-to-folder'
    | 'rename-folder'
    | 'chmod-folder'
    | 'retarget-link';
  readonly pick: number;
}
const edit = fc.record({
  kind: fc.constantFrom(
    'rewrite-same-size-and-time',
    'touch',
    'chmod',
    'delete',
    'rename',
    'move',
    'add',
    'file-to-folder',
    'rename-folder',
    'chmod-folder',
    'retarget-link',
  ),
  pick: fc.nat(),
}) as fc.Arbitrary<EditSpec>;

/**
 * Makes `change` in the folder `dir`: a file rewritten with other bytes of its size and given
 * its mtime back (as npm, tar and cp -p leave files), only touched, its mode changed, deleted,
 * renamed, moved to another folder, a file added, or a file made a folder of its name; a folder
 * renamed or its mode changed; a link pointed elsewhere.
 */
function makeEdit(dir: string, change: EditSpec, at: number): void {
  const entries = [...fingerprintTree(dir)];
  const files = entries.filter(([, print]) => print.type === 'file').map(([relative]) => relative);
  const folders = [
    '',
    ...entries.filter(([, print]) => print.type === 'dir').map(([relative]) => relative),
  ];
  const folder = folders[change.pick % folders.length] ?? '';
  const file = files.length === 0 ? undefined : files[change.pick % files.length];
  const full = (relative: string): string => path.join(dir, relative);
  /** A new file, dated to the microsecond as the made-up ones are, for a rewrite to keep. */
  const writeNew = (file: string, text: string): void => {
    writeFileSync(file, text);
    const now = fileTime(BigInt(Date.now()) * 1_000_000n);
    utimesSync(file, now, now);
  };
  if (change.kind === 'add') {
    writeNew(path.join(full(folder), `added-${at}`), `added ${at}`);
    return;
  }
  if (change.kind === 'rename-folder' || change.kind === 'chmod-folder') {
    // Not the folder backed up itself.
    if (folder === '') return;
    if (change.kind === 'chmod-folder')
      chmodSync(full(folder), Number(lstatSync(full(folder)).mode & 0o7777) ^ 0o020);
    else renameSync(full(folder), path.join(path.dirname(full(folder)), `folder-renamed-${at}`));
    return;
  }
  if (change.kind === 'retarget-link') {
    const links = entries.filter(([, print]) => print.type === 'symlink');
    const [link] = links[change.pick % Math.max(1, links.length)] ?? [];
    if (link === undefined) return;
    rmSync(full(link));
    symlinkSync(`elsewhere-${at}`, full(link));
    return;
  }
  if (file === undefined) return;
  const stats = lstatSync(full(file), { bigint: true });
  switch (change.kind) {
    case 'rewrite-same-size-and-time': {
      const bytes = readFileSync(full(file));
      if (bytes.length === 0) return;
      bytes[0] = (bytes[0] ?? 0) ^ 0xff;
      writeFileSync(full(file), bytes);
      const time = fileTime(stats.mtimeNs);
      utimesSync(full(file), time, time);
      // The size and mtime are as they were: only the ctime tells the backup it changed.
      expect(lstatSync(full(file), { bigint: true }).mtimeNs).toBe(stats.mtimeNs);
      break;
    }
    case 'touch':
      utimesSync(full(file), 1_000_000_000 + at, 1_000_000_000 + at);
      break;
    case 'chmod':
      chmodSync(full(file), Number(stats.mode & 0o7777n) ^ 0o100);
      break;
    case 'delete':
      rmSync(full(file));
      break;
    case 'rename':
      renameSync(full(file), path.join(path.dirname(full(file)), `renamed-${at}`));
      break;
    case 'move':
      if (!folder.startsWith(`${file}/`))
        renameSync(full(file), path.join(full(folder), `moved-${at}`));
      break;
    case 'file-to-folder':
      rmSync(full(file));
      mkdirSync(full(file));
      writeNew(path.join(full(file), 'inside'), `was a file ${at}`);
      break;
  }
}

describe('backups of made-up trees changed since the last', () => {
  it(`back up every change, however the file index could miss it: ${INTO_TREE_RUNS} trees`, async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        entries,
        fc.array(edit, { minLength: 1, maxLength: 6 }),
        async (tree, edits) => {
          run += 1;
          const source = path.join(scratch, 'source');
          const target = path.join(scratch, 'changed-restored');
          rmSync(source, { recursive: true, force: true });
          rmSync(target, { recursive: true, force: true });
          mkdirSync(source);
          makeTree(source, tree);
          const bucket = `changed-${run}`;
          await engine.createBucket({ name: bucket, type: 'backup', storageClass: 'hot' });
          await engine.backup({ dir: source, bucket, allowEmpty: true });
          edits.forEach((change, at) => makeEdit(source, change, at));
          const expected = expectedOf(fingerprintTree(source));
          await engine.backup({ dir: source, bucket, allowEmpty: true });
          await engine.restore({ bucket, to: target, overwrite: false });
          expect(fingerprintTree(target)).toEqual(expected);
          // And once all is backed up, the next backup finds nothing to store.
          expect(await engine.backup({ dir: source, bucket, allowEmpty: true })).toMatchObject({
            unchanged: true,
          });
        },
      ),
      { numRuns: INTO_TREE_RUNS, seed: SEED, endOnFailure: false },
    );
  }, 900_000);
});
