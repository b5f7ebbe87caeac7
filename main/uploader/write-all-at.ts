import type { FileHandle } from 'node:fs/promises';

/** Writes all of `bytes` at `position` of `handle`: one write may take fewer than it was given. */
export async function writeAllAt(
  handle: FileHandle,
  bytes: Uint8Array,
  position: number,
): Promise<void> {
  for (let offset = 0; offset < bytes.length;) {
    const { bytesWritten } = await handle.write(
      bytes,
      offset,
      bytes.length - offset,
      position + offset,
    );
    offset += bytesWritten;
  }
}
