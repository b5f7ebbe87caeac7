import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';

// What a restore must give back of a tree, entry by entry: its kind; a file's content, mode and
// mtime (whole seconds); a folder's mode; a symlink's target.

export interface Fingerprint {
  type: 'file' | 'dir' | 'symlink';
  sha?: string;
  mode?: number;
  mtime?: number;
  target?: string;
}

/** Every entry under `root`, by its path below it. */
export function fingerprintTree(root: string): Map<string, Fingerprint> {
  const out = new Map<string, Fingerprint>();
  const walk = (rel: string): void => {
    for (const name of readdirSync(path.join(root, rel))) {
      const child = rel === '' ? name : `${rel}/${name}`;
      const full = path.join(root, child);
      const stats = lstatSync(full);
      if (stats.isSymbolicLink()) out.set(child, { type: 'symlink', target: readlinkSync(full) });
      else if (stats.isDirectory()) {
        out.set(child, { type: 'dir', mode: stats.mode & 0o7777 });
        walk(child);
      } else {
        out.set(child, {
          type: 'file',
          sha: createHash('sha256').update(readFileSync(full)).digest('hex'),
          mode: stats.mode & 0o7777,
          mtime: Math.floor(stats.mtimeMs / 1000),
        });
      }
    }
  };
  walk('');
  return out;
}
