import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  openSync,
  readdirSync,
  readSync,
  statSync,
  writeSync,
} from 'node:fs';
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

/**
 * Bytes of data blocks the server keeps on its disk: its packs, those retired and not yet
 * deleted, and blocks stored as files of their own.
 */
export function storedDataBytes(dataDir: string): number {
  const bytesUnder = (dir: string): number => {
    if (!existsSync(dir)) return 0;
    let total = 0;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      total += entry.isDirectory() ? bytesUnder(full) : statSync(full).size;
    }
    return total;
  };
  return ['packs', 'retired-packs', 'blocks'].reduce(
    (sum, folder) => sum + bytesUnder(path.join(dataDir, folder)),
    0,
  );
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

/** The size of the metadata CAR the server holds for a version, as pushed. */
export function storedCarBytes(dataDir: string, versionId: string): number {
  const db = new Database(path.join(dataDir, 'service.sqlite'), { readonly: true });
  try {
    const bytes = db
      .prepare<[string], number>('SELECT car_bytes FROM versions WHERE id = ?')
      .pluck()
      .get(versionId);
    if (bytes === undefined) throw new Error(`the server holds no version ${versionId}`);
    return bytes;
  } finally {
    db.close();
  }
}

/**
 * Flips a byte of the server's stored copy of a version's metadata CAR, 3 bytes before its
 * end (in its last block), as a bad disk: in the file of its last chunk.
 */
export function damageStoredCar(dataDir: string, versionId: string): void {
  const db = new Database(path.join(dataDir, 'service.sqlite'), { readonly: true });
  let chunk: { file: string; offset: number } | undefined;
  try {
    const chunks = db
      .prepare<[string], Buffer | null>('SELECT car_chunks FROM versions WHERE id = ?')
      .pluck()
      .get(versionId);
    if (!chunks) throw new Error(`the server holds no chunks of version ${versionId}`);
    chunk = db
      .prepare<[Buffer], { file: string; offset: number }>(
        `SELECT file, file_offset + length - 3 AS offset FROM metadata_chunks WHERE digest = ?`,
      )
      .get(chunks.subarray(chunks.length - 32));
  } finally {
    db.close();
  }
  if (!chunk) throw new Error(`the last chunk of version ${versionId} is not stored`);
  const fd = openSync(path.join(dataDir, 'metadata', 'chunks', `${chunk.file}.chunks`), 'r+');
  try {
    const byte = Buffer.alloc(1);
    readSync(fd, byte, 0, 1, chunk.offset);
    byte[0] = (byte[0] ?? 0) ^ 0xff;
    writeSync(fd, byte, 0, 1, chunk.offset);
  } finally {
    closeSync(fd);
  }
}
