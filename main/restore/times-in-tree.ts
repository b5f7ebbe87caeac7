import { CID } from 'multiformats/cid';
import { isEngineError } from '../api/index.ts';
import { DAG_PB_CODEC } from '../protocol/index.ts';
import { directoryLinks, entryOfNode, type NodeLookup } from './walk-tree.ts';

// The modification times a version's tree gives its entries, by path: what a backup whose file
// index does not describe the version it builds on (a new computer's first, after restoring
// onto it) tells a restored entry by. A restore sets times to the microsecond, and without the
// version's own nanoseconds each restored file and folder would make a tree that differs below
// the microsecond, and a version nothing changed in (main/packer/pack-source.ts, timeInVersion).
//
// A backup asks in its walk's order, a folder's entries one after another, and only for times
// of whole microseconds (those a restore may have set); each folder's names are read once, and
// kept for the few folders asked about last.

/** Folders whose names are kept at once: the walk's current folders, and a few besides. */
const FOLDERS_KEPT = 64;

/** A lookup of the time `rootCid`'s tree gives the entry at a '/'-separated path ('' the top). */
export function timesInTree(
  rootCid: string,
  nodes: NodeLookup,
): (relativePath: string) => bigint | undefined {
  const root = CID.parse(rootCid);
  /** Folders' entries by name, by their path; null for a path that holds no folder. */
  const folders = new Map<string, Map<string, CID> | null>();
  const cidOf = (relativePath: string): CID | undefined => {
    if (relativePath === '') return root;
    const slash = relativePath.lastIndexOf('/');
    const parent = slash < 0 ? '' : relativePath.slice(0, slash);
    return entriesOf(parent)?.get(relativePath.slice(slash + 1));
  };
  const entriesOf = (folder: string): Map<string, CID> | null => {
    const kept = folders.get(folder);
    if (kept !== undefined) {
      // Asked again: kept longest.
      folders.delete(folder);
      folders.set(folder, kept);
      return kept;
    }
    const cid = cidOf(folder);
    const links =
      cid === undefined || cid.code !== DAG_PB_CODEC ? undefined : directoryLinks(cid, nodes);
    const entries = links ? new Map(links.map((link) => [link.name, link.cid])) : null;
    folders.set(folder, entries);
    if (folders.size > FOLDERS_KEPT) folders.delete(folders.keys().next().value as string);
    return entries;
  };
  return (relativePath) => {
    try {
      const cid = cidOf(relativePath);
      // A raw leaf (another tool's file of one chunk) carries no time.
      return cid === undefined || cid.code !== DAG_PB_CODEC
        ? undefined
        : entryOfNode(cid, nodes).mtimeNanoseconds;
    } catch (error) {
      // A node of the old tree that cannot be read gives no time: the entry keeps its own, which
      // is what it has on disk, and the backup goes on. Only the version's time is lost.
      if (isEngineError(error, 'protocol')) return undefined;
      throw error;
    }
  };
}
