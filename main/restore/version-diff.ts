import { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { compareUtf8, restoredMicroseconds } from '../protocol/index.ts';
import type { TreeIndex } from '../uploader/index.ts';
import { versionEntryOf, type VersionEntry } from './browse-version.ts';
import { checkedTreeTotals, mostEntriesStated } from './tree-totals.ts';
import { versionPathParts } from './version-path.ts';
import {
  directoryLinks,
  entryOfNode,
  walkTree,
  type DecodedNode,
  type TreeEntry,
} from './walk-tree.ts';

// What changed from one version of a bucket to another (`canopy diff`), from their metadata
// alone: no block is fetched, so it works offline once both versions are kept. Content
// addressing does most of it: a folder whose CID is the same in both holds the same names,
// bytes, modes and times all the way down, and is not read; only the folders on the way to a
// change are. Two versions of 100 000 files with one file changed compare two folder listings
// and the one file.
//
// A file is `modified` when its bytes differ (its leaves, which its node lists by CID, or its
// size), and `metadata` when only its mode or modification time does; a symbolic link likewise
// by its target. A folder's own modification time changes whenever a name in it comes or goes,
// which the lines for those names already tell: a folder is `metadata` only for its mode.

/** How an entry differs between the older version and the newer. */
export type VersionChangeKind = 'added' | 'removed' | 'modified' | 'metadata' | 'type';

export interface VersionChange {
  /** Its path from the version's top, names joined by `/`; '' for the top itself. */
  readonly path: string;
  readonly change: VersionChangeKind;
  /** As the older version holds it; null when it was added. */
  readonly before: VersionEntry | null;
  /** As the newer version holds it; null when it was removed. */
  readonly after: VersionEntry | null;
}

/** What comparing needs of a version's tree: no leaf. */
type ComparedTree = Pick<TreeIndex, 'manifest' | 'nodes'>;

/** An entry of one version's tree: its CID, and the nodes it is read from. */
interface Side {
  readonly cid: CID;
  readonly tree: ComparedTree;
}

function rootOf(tree: ComparedTree): CID {
  const root = CID.asCID(tree.manifest['root']);
  if (!root) throw new EngineError('protocol', 'the manifest names no root');
  return root;
}

/** The first entry a walk gives, the one it starts from; undefined when there is none. */
function firstOf(walk: Iterable<TreeEntry>): TreeEntry | undefined {
  for (const entry of walk) return entry;
  return undefined;
}

/** The entry at `parts` in `tree`, decoded; undefined when the tree has none there. */
function entryAt(tree: ComparedTree, parts: readonly string[]): TreeEntry | undefined {
  return firstOf(walkTree(rootOf(tree), tree.nodes, parts, 0));
}

/** The entry whose node is `side`, decoded, without what it holds. */
function decoded(side: Side): TreeEntry {
  return entryOfNode(side.cid, side.tree.nodes);
}

/** `entry` as listed at `path`, named by that path's last name (the walk's top has none). */
function listedAt(entry: TreeEntry, path: string): VersionEntry {
  return { ...versionEntryOf(entry, path), name: path.slice(path.lastIndexOf('/') + 1) };
}

function joined(path: string, name: string): string {
  return path === '' ? name : `${path}/${name}`;
}

function bytesEqual(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  return Buffer.from(a ?? []).equals(Buffer.from(b ?? []));
}

/** Whether two File nodes give the same bytes: the same size, leaves and inline data. */
function sameBytes(a: DecodedNode, b: DecodedNode): boolean {
  if (a.unixfs.fileSize() !== b.unixfs.fileSize() || a.links.length !== b.links.length)
    return false;
  for (const [index, link] of a.links.entries())
    if (!link.Hash.equals(b.links[index]?.Hash)) return false;
  return bytesEqual(a.unixfs.data, b.unixfs.data);
}

/**
 * Whether two times are the same as far as a restore can tell: it sets a time to the nearest
 * microsecond (file-time.ts), so a file restored and backed up again would otherwise be told as
 * changed, as would all of them after a whole restore. No edit lands in the microsecond of the
 * time it replaces.
 */
function sameTime(a: bigint | undefined, b: bigint | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return restoredMicroseconds(a) === restoredMicroseconds(b);
}

function sameModeAndTime(a: TreeEntry, b: TreeEntry): boolean {
  return a.mode === b.mode && sameTime(a.mtimeNanoseconds, b.mtimeNanoseconds);
}

/** How two entries of the same path differ, or undefined when only what they hold may. */
function changeOf(a: TreeEntry, b: TreeEntry): VersionChangeKind | undefined {
  if (a.kind !== b.kind) return 'type';
  switch (a.kind) {
    case 'directory':
      return a.mode === b.mode ? undefined : 'metadata';
    case 'file':
      if (!a.fileNode || !b.fileNode) throw new Error('a file entry without its File node');
      if (!sameBytes(a.fileNode, b.fileNode)) return 'modified';
      return sameModeAndTime(a, b) ? undefined : 'metadata';
    case 'symlink':
      if (a.target !== b.target) return 'modified';
      return sameModeAndTime(a, b) ? undefined : 'metadata';
  }
}

export class VersionDiffer {
  private readonly basePath: string;
  /** Changes told so far. */
  private told = 0;
  private readonly top: { older: Side | undefined; newer: Side | undefined };

  /**
   * Compares the entry at `subPath` (as `canopy ls` takes it; the whole version by default) in
   * `older` and in `newer`; `olderSubPath`, where the older holds it, when it is named apart.
   * Throws not_found when neither holds it.
   */
  constructor(older: ComparedTree, newer: ComparedTree, subPath = '', olderSubPath = subPath) {
    const olderParts = versionPathParts(olderSubPath, older.manifest['source_label']);
    const newerParts = versionPathParts(subPath, newer.manifest['source_label']);
    const olderTop = entryAt(older, olderParts);
    const newerTop = entryAt(newer, newerParts);
    if (!olderTop && !newerTop)
      throw new EngineError(
        'not_found',
        `neither version holds ${subPath} (canopy ls --version ID shows what each holds)`,
      );
    this.basePath = (newerTop ? newerParts : olderParts).join('/');
    this.top = {
      older: olderTop && { cid: olderTop.cid, tree: older },
      newer: newerTop && { cid: newerTop.cid, tree: newer },
    };
  }

  /**
   * Each entry that differs, a folder before what it holds and names in UTF-8 order (as
   * `canopy ls -R` lists them): an added or removed folder, then everything in it.
   */
  *changes(): Generator<VersionChange> {
    // Each path of either tree changes once at most, so two trees as their manifests state them
    // differ in no more entries than both hold. Two that stand for more (folders linked from
    // many places) would be told without end: past that, they are refused. A subtree added or
    // removed whole is counted before it is walked (everything()).
    const most = [this.top.older, this.top.newer].map((side) =>
      side ? mostEntriesStated(side.tree.manifest) : { files: 0, others: 0 },
    );
    const mostFiles = most.reduce((sum, each) => sum + each.files, 0);
    const mostOthers = most.reduce((sum, each) => sum + each.others, 0);
    let files = 0;
    let others = 0;
    this.told = 0;
    for (const change of this.compare(this.top.older, this.top.newer, this.basePath)) {
      if (change.before?.type === 'file' || change.after?.type === 'file') files += 1;
      else others += 1;
      if (files > mostFiles || others > mostOthers)
        throw new EngineError(
          'protocol',
          `the version's metadata is damaged or was not made by a backup: the two versions differ in more ${files > mostFiles ? 'files' : 'folders and links'} than their manifests state they hold; nothing was compared from ${change.path === '' ? 'their tops' : change.path} on`,
        );
      this.told += 1;
      yield change;
    }
  }

  private *compare(
    older: Side | undefined,
    newer: Side | undefined,
    path: string,
  ): Generator<VersionChange> {
    if (older && newer && older.cid.equals(newer.cid)) return;
    if (!older || !newer) {
      if (newer) yield* this.everything(newer, path, 'added', true);
      if (older) yield* this.everything(older, path, 'removed', true);
      return;
    }
    const before = decoded(older);
    const after = decoded(newer);
    const change = changeOf(before, after);
    if (change)
      yield {
        path,
        change,
        before: listedAt(before, path),
        after: listedAt(after, path),
      };
    if (change === 'type') {
      // A file that became a folder, or the other way round: what the folder holds comes or
      // goes with it.
      if (before.kind === 'directory') yield* this.everything(older, path, 'removed', false);
      if (after.kind === 'directory') yield* this.everything(newer, path, 'added', false);
    } else if (after.kind === 'directory') yield* this.folders(older, newer, path);
  }

  /** The entries of two folders at `path`, name by name. */
  private *folders(older: Side, newer: Side, path: string): Generator<VersionChange> {
    const held = (side: Side): Map<string, Side> => {
      const links = directoryLinks(side.cid, side.tree.nodes) ?? [];
      return new Map(links.map((link) => [link.name, { cid: link.cid, tree: side.tree }]));
    };
    const olderHeld = held(older);
    const newerHeld = held(newer);
    // A large folder is a HAMT (§17.1), whose links come in the order of their names' hashes.
    const names = [...new Set([...olderHeld.keys(), ...newerHeld.keys()])].sort(compareUtf8);
    for (const name of names)
      yield* this.compare(olderHeld.get(name), newerHeld.get(name), joined(path, name));
  }

  /** Everything under `side` (and, `withTop`, itself) as `change`, in `canopy ls -R` order. */
  private *everything(
    side: Side,
    path: string,
    change: 'added' | 'removed',
    withTop: boolean,
  ): Generator<VersionChange> {
    // Before the tree is walked: a hostile one could stand for more paths than memory holds.
    const what = this.told === 0 ? 'compared' : 'compared from there on';
    checkedTreeTotals(side.tree.manifest, side.cid, side.tree.nodes, [], what, path);
    // Walked in the order of the paths, each folder's names sorted as it is opened.
    for (const found of walkTree(
      side.cid,
      side.tree.nodes,
      [],
      Number.POSITIVE_INFINITY,
      'names',
    )) {
      if (found.parts.length === 0 && !withTop) continue;
      const entry = listedAt(found, found.parts.reduce(joined, path));
      yield {
        path: entry.path ?? path,
        change,
        before: change === 'removed' ? entry : null,
        after: change === 'added' ? entry : null,
      };
    }
  }
}
