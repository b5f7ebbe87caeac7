import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { restoredMicroseconds } from '../../main/protocol/restored-time.ts';

// What a restore must give back of a tree, entry by entry: its kind; a file's content, mode and
// mtime; a folder's mode and mtime; a symlink's target and mtime. Times are told as a restore
// gives them, to the nearest microsecond (main/restore/file-time.ts).

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
      const stats = lstatSync(full, { bigint: true });
      const mtime = Number(restoredMicroseconds(stats.mtimeNs));
      const mode = Number(stats.mode & 0o7777n);
      if (stats.isSymbolicLink())
        out.set(child, { type: 'symlink', target: readlinkSync(full), mtime });
      else if (stats.isDirectory()) {
        out.set(child, { type: 'dir', mode, mtime });
        walk(child);
      } else {
        out.set(child, {
          type: 'file',
          sha: createHash('sha256').update(readFileSync(full)).digest('hex'),
          mode,
          mtime,
        });
      }
    }
  };
  walk('');
  return out;
}

/** Every entry under `root` in one string, in path order: equal for trees a restore equates. */
export function treeStateOf(root: string): string {
  return JSON.stringify([...fingerprintTree(root)].sort(([a], [b]) => (a < b ? -1 : 1)));
}
