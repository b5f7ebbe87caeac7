import { closeSync, openSync, truncateSync, writeFileSync, writeSync } from 'node:fs';

/**
 * Makes `file` a sparse file of `size` bytes holding `data` at `offset` and zeros elsewhere,
 * as a disk image's unused space is: holes, which the file system keeps without blocks.
 */
export function writeSparseFile(
  file: string,
  size: number,
  data: Uint8Array,
  offset: number,
): void {
  writeFileSync(file, '');
  truncateSync(file, size);
  const fd = openSync(file, 'r+');
  try {
    writeSync(fd, data, 0, data.length, offset);
  } finally {
    closeSync(fd);
  }
}
