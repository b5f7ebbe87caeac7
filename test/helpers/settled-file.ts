import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Writes a file, and its folders, as if it had been written a minute ago: a backup always reads
 * again a file modified right before it, which the file index cannot vouch for.
 */
export function writeSettled(file: string, bytes: Uint8Array | string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, bytes);
  const aMinuteAgo = new Date(Date.now() - 60_000);
  utimesSync(file, aMinuteAgo, aMinuteAgo);
}
