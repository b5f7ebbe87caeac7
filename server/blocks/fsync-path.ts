import { closeSync, fsyncSync, openSync } from 'node:fs';

/** Makes a file's contents, or a folder's entries (a rename into it), durable. */
export function fsyncPath(file: string): void {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
