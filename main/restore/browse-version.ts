import { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { compareUtf8 } from '../protocol/index.ts';
import type { TreeIndex } from '../uploader/index.ts';
import { checkedTreeTotals } from './tree-totals.ts';
import { versionPathParts } from './version-path.ts';
import { notInVersion } from './not-in-version.ts';
import { walkTree, type TreeEntry } from './walk-tree.ts';

// Lists a folder of a version, or everything below it, from its metadata alone (§17.5): no
// block is fetched, so browsing works offline once the metadata CAR is cached. Read by the tree
// walk a restore uses, so that a listing shows what a restore would bring back, node by node:
// `canopy ls` of a top folder of 5 000 folders took 1.9 s through ipfs-unixfs-exporter, and
// takes 1.5 s so; `canopy ls -R` of all 105 000 entries of that version, 3.3 s, sorting
// included. Each folder is sorted as the walk opens it, not every path at the end: of 300 000
// files, 6.7 s and 222 MB in all, where sorting at the end and printing it whole took 8.2 s and
// 389 MB.

/** Entries listed between two reports of how many. */
const LISTED_TOLD_EVERY = 1000;

/** What browsing needs of a version's tree: no leaf. */
type BrowsedTree = Pick<TreeIndex, 'manifest' | 'nodes'>;

export interface VersionEntry {
  readonly name: string;
  /** Listed with what lies below a folder: its path below that folder (`2019/beach.jpg`). */
  readonly path?: string;
  readonly type: 'file' | 'directory' | 'symlink';
  readonly size: number;
  readonly mode: number | null;
  readonly mtime: number | null;
  readonly target: string | null;
}

/** An entry as the tree walk read it; with `path`, listed by that path (below the folder listed). */
export function versionEntryOf(entry: TreeEntry, path?: string): VersionEntry {
  return {
    name: entry.parts.at(-1) ?? '',
    ...(path === undefined ? {} : { path }),
    type: entry.kind,
    size: entry.fileNode ? Number(entry.fileNode.unixfs.fileSize()) : 0,
    mode: entry.mode ?? null,
    mtime: entry.mtimeWholeSeconds ?? null,
    target: entry.target ?? null,
  };
}

/** Paths by their names from the top, in UTF-8 order name by name: a folder before its own. */
export function comparePaths(a: readonly string[], b: readonly string[]): number {
  const length = Math.min(a.length, b.length);
  for (let index = 0; index < length; index += 1) {
    const order = compareUtf8(a[index] ?? '', b[index] ?? '');
    if (order !== 0) return order;
  }
  return a.length - b.length;
}

/**
 * What the folder at `subPath` holds, in name order; with `recursive`, everything below it, each
 * entry with its path below the folder, each folder before what it holds. A file or link at
 * `subPath` is listed alone.
 */
export function listVersionPath(
  tree: BrowsedTree,
  subPath: string,
  recursive = false,
  /** Told, with `recursive`, how many entries were listed of how many, as the walk goes. */
  onListed?: (listed: number, entries: number) => void,
): VersionEntry[] {
  const root = CID.asCID(tree.manifest['root']);
  if (!root) throw new EngineError('protocol', 'the manifest names no root');
  const parts = versionPathParts(subPath, tree.manifest['source_label']);
  const depth = recursive ? Number.POSITIVE_INFINITY : 1;
  // Listed whole, a hostile tree could stand for more paths than memory holds.
  const totals = recursive
    ? checkedTreeTotals(tree.manifest, root, tree.nodes, parts, 'listed')
    : undefined;
  // What the folder holds, itself left out.
  const entries = totals ? totals.files + totals.others - 1 : 0;
  const listed: VersionEntry[] = [];
  let found = false;
  // By name, folder by folder, so already in the order of the paths: sorted at the end, the
  // paths of `canopy ls -R` over 300 000 files held as many arrays of their names.
  for (const entry of walkTree(root, tree.nodes, parts, depth, 'names')) {
    if (!found) {
      found = true;
      if (entry.kind === 'directory') continue;
      return [versionEntryOf(entry, recursive ? entry.parts.at(-1) : undefined)];
    }
    listed.push(
      versionEntryOf(entry, recursive ? entry.parts.slice(parts.length).join('/') : undefined),
    );
    if (totals && listed.length % LISTED_TOLD_EVERY === 0) onListed?.(listed.length, entries);
  }
  if (!found) throw notInVersion(subPath, parts, root, tree.nodes);
  if (totals) onListed?.(listed.length, entries);
  return listed;
}
