import { statfsSync } from 'node:fs';

// Room the service leaves free on the disk of its data folder. A backup of a folder to the same
// disk (the embedded service's default: this computer) would otherwise fill it to the last
// byte, and every other program of the user's would then fail to save its files; Syncthing
// keeps 1 % free for the same reason. New data that would dip into the room is refused as if
// the disk were full (OUT_OF_SPACE_MSG): the operator's to fix on a server, the user's own
// disk to clear for the embedded service. Reads never need room, and are never refused.

export interface KeptFree {
  /** Of the disk's size. */
  readonly fraction: number;
  /** At most this much, however large the disk: 1 % of a backup disk of 8 TB is no reserve. */
  readonly maxBytes: number;
}

/** Refuses `incomingBytes` of new data into `dir` that would leave less than `kept` free. */
export function refuseIntoKeptFree(
  dir: string,
  incomingBytes: number,
  kept: KeptFree | null,
): void {
  if (kept === null) return;
  const disk = statfsSync(dir);
  // Some file systems (FUSE ones, network ones) tell no sizes: nothing to go by.
  if (disk.blocks === 0) return;
  const room = Math.min(disk.blocks * disk.bsize * kept.fraction, kept.maxBytes);
  const free = disk.bavail * disk.bsize;
  if (free - incomingBytes >= room) return;
  throw Object.assign(
    new Error(
      `${incomingBytes} bytes would leave less than the ${Math.round(room)} bytes kept free on the disk of ${dir} (${free} bytes free)`,
    ),
    { code: 'ENOSPC' },
  );
}

/**
 * Bytes of new data let into each data folder and not yet done with (being received, or
 * written and not yet counted by the file system): what its free space does not show yet. Two
 * shards arriving at once each saw the same free space, and both were let in where only one
 * had room.
 */
const admitted = new Map<string, number>();

/**
 * Lets `incomingBytes` of new data into `dir`, counting the bytes let in before them and not
 * yet released, or refuses them as refuseIntoKeptFree does. Returns the release, to call once
 * they are written or refused (more than once does no harm).
 */
export function admitIntoKeptFree(
  dir: string,
  incomingBytes: number,
  kept: KeptFree | null,
): () => void {
  if (kept === null) return () => undefined;
  const before = admitted.get(dir) ?? 0;
  refuseIntoKeptFree(dir, before + incomingBytes, kept);
  admitted.set(dir, before + incomingBytes);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (admitted.get(dir) ?? 0) - incomingBytes;
    if (left > 0) admitted.set(dir, left);
    else admitted.delete(dir);
  };
}
