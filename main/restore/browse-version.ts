import { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { compareUtf8, DAG_PB_CODEC } from '../protocol/index.ts';
import type { TreeIndex } from '../uploader/index.ts';
import { versionPathParts } from './version-path.ts';
import { walkTree, type TreeEntry } from './walk-tree.ts';

// Lists a folder of a version, or everything below it, from its metadata alone (§17.5): no
// block is fetched, so browsing works offline once the metadata CAR is cached.

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

/** That the version holds nothing at `subPath`, whose names are `parts`, and where to look. */
function notInVersion(subPath: string, parts: readonly string[], cause?: unknown): EngineError {
  // What is there instead is one level up: the folder above, or the version's top.
  const above = parts.slice(0, -1).join('/');
  return new EngineError(
    'not_found',
    `no ${subPath} in this version (canopy ls ${above === '' ? 'without a path' : JSON.stringify(above)} shows what is there)`,
    cause === undefined ? undefined : { cause },
  );
}

function rootOf(tree: BrowsedTree): CID {
  const root = CID.asCID(tree.manifest['root']);
  if (!root) throw new EngineError('protocol', 'the manifest names no root');
  return root;
}

function metadataStore(tree: BrowsedTree) {
  return {
    // eslint-disable-next-line @typescript-eslint/require-await -- the exporter's contract is async
    async *get(cid: CID): AsyncGenerator<Uint8Array> {
      const node = cid.code === DAG_PB_CODEC ? tree.nodes.get(cid) : undefined;
      if (!node)
        throw new EngineError(
          'not_found',
          'browsing needs only metadata; this path reaches file contents',
        );
      yield node;
    },
  };
}

export async function listVersionPath(tree: BrowsedTree, subPath: string): Promise<VersionEntry[]> {
  const root = rootOf(tree);
  const store = metadataStore(tree);
  const parts = versionPathParts(subPath, tree.manifest['source_label']);
  // Loaded here, not with the engine: only browsing uses it, and every other command started
  // some 50 ms sooner without it.
  const { exporter } = await import('ipfs-unixfs-exporter');
  let target;
  try {
    target = await exporter([root.toString(), ...parts].join('/'), store);
  } catch (error) {
    if (error instanceof EngineError) throw error;
    throw notInVersion(subPath, parts, error);
  }
  const describe = (name: string, entry: Awaited<ReturnType<typeof exporter>>): VersionEntry => {
    if (entry.type !== 'file' && entry.type !== 'directory') {
      return {
        name,
        type: 'file',
        size: Number(entry.size),
        mode: null,
        mtime: null,
        target: null,
      };
    }
    const isSymlink = entry.type === 'file' && entry.unixfs.type === 'symlink';
    return {
      name,
      type: isSymlink ? 'symlink' : entry.type,
      size: entry.type === 'file' && !isSymlink ? Number(entry.unixfs.fileSize()) : 0,
      mode: entry.unixfs.mode ?? null,
      mtime: entry.unixfs.mtime ? Number(entry.unixfs.mtime.secs) : null,
      target: isSymlink ? new TextDecoder().decode(entry.unixfs.data) : null,
    };
  };
  if (target.type !== 'directory') return [describe(parts.at(-1) ?? '', target)];
  const entries: VersionEntry[] = [];
  for await (const child of target.entries())
    entries.push(describe(child.name, await exporter(child.cid, store)));
  // A large folder is a HAMT (§17.1), whose entries come in the order of their names' hashes.
  return entries.sort((a, b) => compareUtf8(a.name, b.name));
}

/** An entry as the tree walk read it, listed as `path` below the folder listed. */
function walkedEntry(entry: TreeEntry, path: string): VersionEntry {
  return {
    name: entry.parts.at(-1) ?? '',
    path,
    type: entry.kind,
    size: entry.fileNode ? Number(entry.fileNode.unixfs.fileSize()) : 0,
    mode: entry.mode ?? null,
    // Whole seconds, as a folder's listing gives them.
    mtime: entry.mtimeSeconds === undefined ? null : Math.floor(entry.mtimeSeconds),
    target: entry.target ?? null,
  };
}

/**
 * Everything below the folder at `subPath`, each entry with its path below it, parents before
 * what they hold; a file or link at `subPath` is listed alone. Read by the tree walk a restore
 * uses, node by node: `canopy ls -R` of a version of 100 000 files in 5 000 folders took about
 * 2 s more than listing one small folder, some 20 µs an entry, sorting included; read through
 * the exporter, as a folder's listing is, its top folder's 5 000 entries took 0.5 s, about
 * 100 µs each.
 */
export function listVersionTree(tree: BrowsedTree, subPath: string): VersionEntry[] {
  const parts = versionPathParts(subPath, tree.manifest['source_label']);
  const listed: Array<{ readonly parts: readonly string[]; readonly entry: VersionEntry }> = [];
  let found = false;
  for (const entry of walkTree(rootOf(tree), tree.nodes, parts)) {
    if (!found) {
      found = true;
      if (entry.kind === 'directory') continue;
      return [walkedEntry(entry, entry.parts.at(-1) ?? '')];
    }
    const below = entry.parts.slice(parts.length);
    listed.push({ parts: below, entry: walkedEntry(entry, below.join('/')) });
  }
  if (!found) throw notInVersion(subPath, parts);
  // In name order within each folder, each folder before what it holds: a HAMT's entries
  // (§17.1) come in the order of their names' hashes.
  listed.sort((a, b) => comparePaths(a.parts, b.parts));
  return listed.map(({ entry }) => entry);
}

/** Paths by their names from the top, in UTF-8 order name by name: a folder before its own. */
function comparePaths(a: readonly string[], b: readonly string[]): number {
  const length = Math.min(a.length, b.length);
  for (let index = 0; index < length; index += 1) {
    const order = compareUtf8(a[index] ?? '', b[index] ?? '');
    if (order !== 0) return order;
  }
  return a.length - b.length;
}
