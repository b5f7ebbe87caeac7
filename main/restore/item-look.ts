import { createHash } from 'node:crypto';
import { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { compareUtf8, restoredMicroseconds } from '../protocol/index.ts';
import type { TreeIndex } from '../uploader/index.ts';
import { versionEntryOf, type VersionEntry } from './browse-version.ts';
import { versionPathParts } from './version-path.ts';
import { directoryLinks, walkTree, type TreeEntry } from './walk-tree.ts';

// One file, folder or link as one version holds it, reduced to what tells it apart from the
// same path in another version (`canopy history`): what it holds, and its mode and time. Read
// from the version's metadata alone, and kept as plain values, so that a history of many
// versions holds no version's tree open.

/** What reading needs of a version's tree: no leaf. */
type ReadTree = Pick<TreeIndex, 'manifest' | 'nodes'>;

/** How an item differs from the same path in the version before. */
export type ItemChangeKind = 'added' | 'removed' | 'modified' | 'metadata' | 'type';

export interface ItemLook {
  /** As `canopy ls` lists it. */
  readonly entry: VersionEntry;
  /**
   * What it holds, as a digest: the same for the same bytes (a file's size and leaves), the same
   * target (a link), or the same names holding the same, all the way down (a folder).
   */
  readonly content: string;
  /**
   * Its mode and time, to the microsecond a restore sets (file-time.ts); a folder's mode alone,
   * as `canopy diff` tells it: its time moves whenever a name in it comes or goes, which its
   * content tells already, or comes and goes between two versions, which tells nothing.
   */
  readonly modeAndTime: string;
}

function digestOf(parts: readonly (string | Uint8Array)[]): string {
  const hash = createHash('sha256');
  for (const part of parts) {
    const bytes = typeof part === 'string' ? Buffer.from(part) : part;
    // Each part with its length before it: no two lists of parts give the same stream.
    hash.update(`${bytes.length}:`).update(bytes);
  }
  return hash.digest('hex');
}

function contentOf(entry: TreeEntry, nodes: ReadTree['nodes']): string {
  switch (entry.kind) {
    case 'file': {
      if (!entry.fileNode) throw new Error('a file entry without its File node');
      const { links, unixfs } = entry.fileNode;
      return digestOf([
        'file',
        unixfs.fileSize().toString(),
        ...links.map((link) => link.Hash.bytes),
        unixfs.data ?? new Uint8Array(),
      ]);
    }
    case 'symlink':
      return digestOf(['symlink', entry.target ?? '']);
    case 'directory': {
      // Its names and what each holds, not its own mode and time: those are told apart below.
      const links = directoryLinks(entry.cid, nodes) ?? [];
      links.sort((a, b) => compareUtf8(a.name, b.name));
      return digestOf(['directory', ...links.flatMap((link) => [link.name, link.cid.bytes])]);
    }
  }
}

/**
 * The item at `subPath` (as `canopy ls` takes it) in `tree`; undefined when the version holds
 * nothing there, or when `subPath` leads above its top.
 */
export function itemLookAt(tree: ReadTree, subPath: string): ItemLook | undefined {
  const root = CID.asCID(tree.manifest['root']);
  if (!root) throw new EngineError('protocol', 'the manifest names no root');
  let parts: string[];
  try {
    parts = versionPathParts(subPath, tree.manifest['source_label']);
  } catch (error) {
    if (error instanceof EngineError && error.code === 'not_found') return undefined;
    throw error;
  }
  for (const entry of walkTree(root, tree.nodes, parts, 0)) {
    const time = entry.kind === 'directory' ? undefined : entry.mtimeNanoseconds;
    return {
      entry: { ...versionEntryOf(entry), name: parts.at(-1) ?? '' },
      content: contentOf(entry, tree.nodes),
      modeAndTime: `${entry.mode ?? ''}:${time === undefined ? '' : restoredMicroseconds(time)}`,
    };
  }
  return undefined;
}

/**
 * How the item changed from `older` to `newer` (each undefined where its version holds nothing
 * at the path); undefined when it did not.
 */
export function itemChange(
  older: ItemLook | undefined,
  newer: ItemLook | undefined,
): ItemChangeKind | undefined {
  if (!older) return newer ? 'added' : undefined;
  if (!newer) return 'removed';
  if (older.entry.type !== newer.entry.type) return 'type';
  if (older.content !== newer.content) return 'modified';
  return older.modeAndTime === newer.modeAndTime ? undefined : 'metadata';
}
