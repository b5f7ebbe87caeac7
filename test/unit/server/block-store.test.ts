import { afterEach, describe, expect, it } from 'vitest';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { BlockStore } from '../../../server/blocks/block-store.ts';
import type { BlockLocation } from '../../../server/store/stored-blocks.ts';

// The block store's files on a real disk: packs written, committed, read, retired and
// recovered after a crash.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function newStore(): { store: BlockStore; dataDir: string } {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'canopy-blocks-'));
  dirs.push(dataDir);
  return { store: new BlockStore(dataDir), dataDir };
}

/** Writes the given blocks into one committed pack; returns their locations. */
async function committedPack(store: BlockStore, blocks: readonly Buffer[]) {
  const pack = await store.startPack();
  const locations: BlockLocation[] = [];
  for (const [index, bytes] of blocks.entries()) {
    const offset = pack.append(bytes);
    locations.push({ cid: `block-${index}`, size: bytes.length, pack: pack.id, offset });
    await pack.ready();
  }
  await pack.finish();
  store.commitPack(pack);
  return { id: pack.id, locations };
}

describe('BlockStore', () => {
  it('reads every block of a committed pack back from its offset', async () => {
    const { store } = newStore();
    // Sizes around the writer's 1 MiB batches, so blocks straddle its writes.
    const blocks = [1, 900_000, 300_000, 2 << 20, 17].map((size) => randomBytes(size));
    const { id, locations } = await committedPack(store, blocks);
    expect(existsSync(store.packPath(id))).toBe(true);
    const reader = store.openReader();
    try {
      for (const [index, location] of locations.entries())
        expect((await reader.read(location)).equals(blocks[index] ?? Buffer.alloc(0))).toBe(true);
    } finally {
      reader.close();
    }
  });

  it('keeps a retired pack on disk while a reader is open, and unlinks it when the last closes', async () => {
    const { store } = newStore();
    const block = randomBytes(5000);
    const { id, locations } = await committedPack(store, [block]);
    const first = store.openReader();
    const second = store.openReader();
    store.retirePack(id);
    expect(existsSync(store.packPath(id))).toBe(true);
    first.close();
    expect(existsSync(store.packPath(id))).toBe(true);
    expect((await second.read(locations[0] as BlockLocation)).equals(block)).toBe(true);
    second.close();
    expect(existsSync(store.packPath(id))).toBe(false);
    const other = await committedPack(store, [block]);
    store.retirePack(other.id);
    expect(existsSync(store.packPath(other.id))).toBe(false);
  });

  it('lets a retired pack go when a reader closes, even if closing one of its files fails', async () => {
    const { store } = newStore();
    const block = randomBytes(5000);
    const { id, locations } = await committedPack(store, [block]);
    const reader = store.openReader();
    expect((await reader.read(locations[0] as BlockLocation)).equals(block)).toBe(true);
    store.retirePack(id);
    // The reader's descriptor of the pack, closed behind its back: its own close then fails,
    // as a close on a disk pulled out does.
    const fd = readdirSync('/proc/self/fd')
      .map(Number)
      .find((open) => {
        try {
          return readlinkSync(`/proc/self/fd/${open}`) === store.packPath(id);
        } catch {
          return false;
        }
      });
    expect(fd).toBeDefined();
    closeSync(fd as number);
    expect(() => reader.close()).toThrow(expect.objectContaining({ code: 'EBADF' }));
    expect(existsSync(store.packPath(id))).toBe(false);
  });

  it('says so when a block is shorter on disk than recorded', async () => {
    const { store } = newStore();
    const { locations } = await committedPack(store, [randomBytes(100)]);
    const reader = store.openReader();
    try {
      const location = locations[0] as BlockLocation;
      await expect(reader.read({ ...location, size: 200 })).rejects.toThrow(
        `block ${location.cid} is shorter on disk than recorded, in ${store.packPath(location.pack ?? '')}`,
      );
    } finally {
      reader.close();
    }
  });

  it('recovers from a crash: staged files and packs no row names go, known packs stay', async () => {
    const { store, dataDir } = newStore();
    const known = await committedPack(store, [randomBytes(10)]);
    const orphan = await committedPack(store, [randomBytes(10)]);
    const staged = await store.startPack();
    staged.append(randomBytes(10));
    await staged.finish();
    writeFileSync(store.stagingPath(), 'half a metadata CAR');
    // A second store on the same folder (an admin command) must not touch staged files.
    new BlockStore(dataDir);
    expect(readdirSync(path.join(dataDir, 'staging'))).toHaveLength(2);

    expect(store.recover(new Set([known.id]))).toEqual({ staged: 2, orphanPacks: 1 });
    expect(readdirSync(path.join(dataDir, 'staging'))).toEqual([]);
    expect(readdirSync(path.join(dataDir, 'packs'))).toEqual([`${known.id}.pack`]);
    expect(existsSync(store.packPath(orphan.id))).toBe(false);
  });
});
