import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { cidText } from '../protocol/index.ts';
import { BLOCK_SIZES, roomOfFile } from './disk-blocks.ts';
import { shapeOfNodeQuickly } from './quick-shape.ts';
import { cidAt, shapeOfNode, type NodeLookup, type NodeShape } from './walk-tree.ts';

// What a part of a version's tree holds once walked: its files, their bytes, and its other
// entries, counted without walking it. A folder node may be linked from many places (two copies
// of a folder are one node), so a tree of a few thousand nodes can stand for more paths than
// any disk holds: 40 folders, each linking twice to the next, make 2^40 of them. A restore or
// a listing walks every path, and would run until the disk or the memory is full. Each folder
// node is counted once here and its totals reused wherever it is linked, so the count costs
// one read of each node, and what a walk would meet is known before it starts.
//
// The manifest states the whole version's files and bytes (§17.3): a part of the tree holding
// more than that was not made by a backup of one folder, and is refused before anything is
// written or listed. Folders and links have no count in the manifest; a real tree mostly has
// fewer of them than files (the bench's tree, one for every twenty), so more than
// OTHER_ENTRIES_PER_FILE for each file, past a floor that leaves room for trees of empty
// folders, is taken for the same.

/**
 * Entries no tree may hold, whatever its manifest states (a hostile server writes that too):
 * ext4 and NTFS hold at most 2^32 files, and a tree standing for more is most likely one whose
 * folders link to one another.
 */
const MAX_ENTRIES = 2 ** 32;
/** Folders and links allowed for each file the manifest states, past OTHER_ENTRIES_FLOOR. */
const OTHER_ENTRIES_PER_FILE = 16;
/** Folders and links allowed whatever the manifest states. */
const OTHER_ENTRIES_FLOOR = 1_000_000;

export interface TreeTotals {
  /** Regular files. */
  readonly files: number;
  /** Their bytes, as their File nodes state them. */
  readonly bytes: number;
  /** Folders (the top one included) and symbolic links. */
  readonly others: number;
  /** The room the files take on a disk of each of BLOCK_SIZES, at the least (disk-blocks.ts). */
  readonly roomAt: readonly number[];
}

interface Counted {
  files: number;
  bytes: number;
  others: number;
  roomAt: number[];
}

/** Past Number.MAX_SAFE_INTEGER, a count stays there. */
function sum(a: number, b: number): number {
  return Math.min(a + b, Number.MAX_SAFE_INTEGER);
}

/** `into` plus `more`. */
function add(into: Counted, more: TreeTotals): void {
  into.files = sum(into.files, more.files);
  into.bytes = sum(into.bytes, more.bytes);
  into.others = sum(into.others, more.others);
  for (const [index, room] of more.roomAt.entries())
    into.roomAt[index] = sum(into.roomAt[index] ?? 0, room);
}

/** Nothing counted yet. */
function nothing(): Counted {
  return { files: 0, bytes: 0, others: 0, roomAt: BLOCK_SIZES.map(() => 0) };
}

/** What a file or a link counts for. */
function totalsOfLeaf(shape: NodeShape): TreeTotals {
  if (shape.kind !== 'file') return { ...nothing(), others: 1 };
  const bytes =
    shape.size > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(shape.size);
  return { files: 1, bytes, others: 0, roomAt: roomOfFile(bytes) };
}

/**
 * What the entry at `under` (names from `root` down) holds, itself included: each folder node
 * read once, however many times it is linked; undefined when the tree has no entry there.
 */
export function treeTotals(
  root: CID,
  nodes: NodeLookup,
  under: readonly string[] = [],
): TreeTotals | undefined {
  const topCid = cidAt(root, under, nodes);
  if (!topCid) return undefined;
  const top = shapeOfNode(topCid, nodes);
  if (top.kind !== 'directory') return totalsOfLeaf(top);
  /** Each folder node counted, by its CID. */
  const counted = new Map<string, TreeTotals>();
  /** The folders being counted, from the top down, with the entries of theirs not yet counted. */
  const open: Array<{ key: string; links: Array<{ cid: CID }>; sum: Counted }> = [];
  const openFolder = (key: string, links: Array<{ cid: CID }>): void => {
    open.push({ key, links, sum: { ...nothing(), others: 1 } });
  };
  const topKey = cidText(topCid);
  openFolder(topKey, top.links());
  while (open.length > 0) {
    const folder = open[open.length - 1] as (typeof open)[number];
    const child = folder.links.pop();
    if (!child) {
      open.pop();
      counted.set(folder.key, folder.sum);
      const parent = open[open.length - 1];
      if (parent) add(parent.sum, folder.sum);
      continue;
    }
    // Read before it is looked up, as most entries are files, which are not kept (and read
    // straight from their bytes); a folder's entries are read only when it is not known already.
    const shape = shapeOfNodeQuickly(child.cid, nodes);
    if (shape.kind !== 'directory') {
      add(folder.sum, totalsOfLeaf(shape));
      continue;
    }
    const key = cidText(child.cid);
    const known = counted.get(key);
    if (known) add(folder.sum, known);
    else openFolder(key, shape.links());
  }
  return counted.get(topKey);
}

/**
 * Totals counted already, by the nodes they were read from and the entry counted: restoring one
 * folder checks it before its leaves are listed (subtree-index.ts) and again before it is
 * written, and a verify before it reads and again to name the files a lost block leaves out.
 */
const countedBefore = new WeakMap<NodeLookup, Map<string, TreeTotals | undefined>>();

/** treeTotals, counted once for the same nodes. */
function countedOnce(
  root: CID,
  nodes: NodeLookup,
  under: readonly string[],
): TreeTotals | undefined {
  let counted = countedBefore.get(nodes);
  if (!counted) {
    counted = new Map<string, TreeTotals | undefined>();
    countedBefore.set(nodes, counted);
  }
  const key = [cidText(root), ...under].join('\0');
  if (!counted.has(key)) counted.set(key, treeTotals(root, nodes, under));
  return counted.get(key);
}

/** The most files, and the most folders and links, a version's tree holds by its manifest. */
export interface MostEntries {
  readonly files: number;
  readonly others: number;
}

/**
 * The most entries a tree whose manifest is `manifest` may hold, as checkedTreeTotals allows
 * them: a walk that meets more has met a tree that stands for more than it states.
 */
export function mostEntriesStated(manifest: Record<string, unknown>): MostEntries {
  const files = manifest['file_count'];
  if (typeof files !== 'number') return { files: MAX_ENTRIES, others: MAX_ENTRIES };
  return {
    files: Math.min(files, MAX_ENTRIES),
    others: Math.min(othersAllowed(files), MAX_ENTRIES),
  };
}

/** The folders and links a tree of `files` files may hold. */
function othersAllowed(files: number): number {
  return Math.max(OTHER_ENTRIES_FLOOR, files * OTHER_ENTRIES_PER_FILE);
}

/**
 * The totals of the entry at `under` below `root`, once checked against what the manifest
 * states for the whole version; a tree that holds more is refused. `what` says what was to be
 * done with it (`restored`), `place` where that entry is in the version.
 */
export function checkedTreeTotals(
  manifest: Record<string, unknown>,
  root: CID,
  nodes: NodeLookup,
  under: readonly string[],
  what: string,
  place = under.join('/'),
): TreeTotals | undefined {
  const totals = countedOnce(root, nodes, under);
  if (!totals) return undefined;
  const files = manifest['file_count'];
  const bytes = manifest['total_bytes'];
  const where = place === '' ? 'its tree' : `${place} in its tree`;
  const damaged = (why: string): EngineError =>
    new EngineError(
      'protocol',
      `the version's metadata is damaged or was not made by a backup: ${where} ${why}; nothing was ${what}`,
    );
  const entries = totals.files + totals.others;
  if (entries > MAX_ENTRIES)
    throw damaged(`holds ${entries} files, folders and links, more than any file system holds`);
  const refuse = (holds: string, states: string): EngineError =>
    damaged(`holds ${holds}, and its manifest states ${states}`);
  if (typeof files === 'number' && totals.files > files)
    throw refuse(`${totals.files} files`, `${files} for the whole version`);
  if (typeof bytes === 'number' && totals.bytes > bytes)
    throw refuse(`${totals.bytes} bytes of files`, `${bytes} for the whole version`);
  const stated = typeof files === 'number' ? files : totals.files;
  if (totals.others > othersAllowed(stated))
    throw refuse(
      `${totals.others} folders and links`,
      `${stated} files, and no real folder holds that many folders and links for its files`,
    );
  return totals;
}
