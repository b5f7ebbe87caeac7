import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MetadataCache } from '../../../main/engine/metadata-cache.ts';
import { openStateDatabase, stateFileOf, type StateDb } from '../../../main/state/index.ts';

// A kept copy of a version's metadata that the disk fails to read is only a copy: it is removed,
// for the version to be pulled again in its place, rather than fail every browse of it. The
// disk's failure is the reader's error (strace's injection, which a scenario would use, counts
// per thread, and so fails the fresh copy too).

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-metadata-cache-'));
const opened: StateDb[] = [];
afterAll(() => {
  for (const db of opened) db.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** A home whose cache holds a copy of version `v1`, with the index of its nodes. */
function homeWithCopy(name: string): { cache: MetadataCache; metadata: string } {
  const home = path.join(scratch, name);
  const metadata = path.join(home, 'metadata');
  mkdirSync(metadata, { recursive: true });
  writeFileSync(path.join(metadata, 'v1.car'), Buffer.alloc(100));
  writeFileSync(path.join(metadata, 'v1.car.nodes'), Buffer.alloc(50));
  const db = openStateDatabase(stateFileOf(home));
  opened.push(db);
  return { cache: new MetadataCache(home, db), metadata };
}

/** A failure of reading a file, with its errno code, as Node gives it. */
function readFailure(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: failed, read`), { code, syscall: 'read' });
}

describe('MetadataCache.cachedTree', () => {
  it('takes a copy the disk fails to read (EIO) as not kept, and removes it', async () => {
    const { cache, metadata } = homeWithCopy('unreadable');
    const tree = await cache.cachedTree('v1', () => Promise.reject(readFailure('EIO')));
    expect(tree).toBeUndefined();
    expect(readdirSync(metadata)).toEqual([]);
  });

  it('throws any other failure to read the copy, and keeps it', async () => {
    const { cache, metadata } = homeWithCopy('refused');
    const refusal = readFailure('EACCES');
    await expect(cache.cachedTree('v1', () => Promise.reject(refusal))).rejects.toBe(refusal);
    expect(readdirSync(metadata).sort()).toEqual(['v1.car', 'v1.car.nodes']);
  });
});
