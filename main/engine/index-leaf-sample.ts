import type { CID } from 'multiformats/cid';
import { CHUNK_BYTES, leavesOfList } from '../packer/index.ts';
import type { SourceFileIndex } from '../state/index.ts';

// Random leaves of the version a source's file index describes, for the few blocks a backup
// fetches again once it is stored. Taken from the index, they cost a pass over its files' sizes
// and a lookup of each file chosen; taken from the version's metadata CAR, they cost reading and
// checking the whole CAR: 0.4 s of the 2.1 s an unchanged backup of 100 000 files took, and
// 3 s of one of 750 000. Each leaf of the index is as likely to be chosen as any other, as in
// a sample of the CAR's leaves.
//
// The index leaves out files it cannot vouch for (written in the last moments before the
// backup, or changed while read), which the next backup reads again; they are the newest data,
// and a sample without them would check least what matters most. So the index is taken only
// when it holds every file of the version.

/** A leaf of a file of the index, by its number among the file's leaves. */
interface LeafPlace {
  readonly path: string;
  readonly size: number;
  readonly leaf: number;
}

/**
 * Up to `count` leaves, each one as likely as any other (reservoir sampling over every file's
 * leaves in turn), with their sizes, of the version of `versionFiles` files the index
 * describes; undefined when the index holds fewer files, keeps no leaves, or holds leaves that
 * do not fit their file's size (the caller then takes them from the version's tree).
 */
export function sampleIndexLeaves(
  index: SourceFileIndex,
  count: number,
  versionFiles: number,
  random: () => number = Math.random,
): Array<{ cid: CID; size: number }> | undefined {
  if (!index.leavesRecorded || count <= 0) return undefined;
  const places: LeafPlace[] = [];
  let files = 0;
  let seen = 0;
  for (const [path, size] of index.files()) {
    files += 1;
    const leaves = Math.ceil(size / CHUNK_BYTES);
    for (let leaf = 0; leaf < leaves; leaf += 1) {
      seen += 1;
      if (places.length < count) {
        places.push({ path, size, leaf });
        continue;
      }
      const slot = Math.floor(random() * seen);
      if (slot < count) places[slot] = { path, size, leaf };
    }
  }
  if (files !== versionFiles) return undefined;
  const chosen: Array<{ cid: CID; size: number }> = [];
  for (const place of places) {
    const entry = index.lookup(place.path);
    const leaves =
      entry?.leaves && entry.size === place.size
        ? leavesOfList(entry.leaves, entry.size)
        : undefined;
    const leaf = leaves?.[place.leaf];
    if (!leaf) return undefined;
    chosen.push(leaf);
  }
  return chosen;
}
