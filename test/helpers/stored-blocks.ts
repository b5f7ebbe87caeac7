import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readdirSync, writeSync } from 'node:fs';
import path from 'node:path';
import { BlockStore } from '../../server/blocks/block-store.ts';
import { findBlock } from '../../server/store/stored-blocks.ts';

// Where a server keeps a block's bytes, read from its data folder the way the server itself
// reads it, for tests that damage a stored block or check what is left on disk.

export interface StoredBlock {
  readonly file: string;
  readonly offset: number;
  readonly size: number;
  /** The pack holding it; null for a block stored as a file of its own. */
  readonly pack: string | null;
}

/** The stored block, or undefined when the server holds no such block. */
export function storedBlock(dataDir: string, cid: string): StoredBlock | undefined {
  const db = new Database(path.join(dataDir, 'service.sqlite'), { readonly: true });
  try {
    const location = findBlock(db, cid);
    if (!location) return undefined;
    return {
      ...new BlockStore(dataDir).fileOf(location),
      size: location.size,
      pack: location.pack,
    };
  } finally {
    db.close();
  }
}

/** Names of the files in one of the store's folders (`packs`, `staging`, `blocks`). */
export function storeFiles(dataDir: string, folder: 'packs' | 'staging' | 'blocks'): string[] {
  const root = path.join(dataDir, folder);
  if (folder !== 'blocks') return readdirSync(root);
  return readdirSync(root).flatMap((fanOut) => readdirSync(path.join(root, fanOut)));
}

/** Overwrites the server's stored copy of `cid` with other bytes of its length, as a bad disk. */
export function damageStoredBlock(dataDir: string, cid: string): void {
  const stored = storedBlock(dataDir, cid);
  if (!stored) throw new Error(`the server stores no block ${cid}`);
  const file = openSync(stored.file, 'r+');
  try {
    writeSync(file, randomBytes(stored.size), 0, stored.size, stored.offset);
  } finally {
    closeSync(file);
  }
}
