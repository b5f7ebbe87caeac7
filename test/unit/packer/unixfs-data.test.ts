import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { describe, expect, it } from 'vitest';
import { buildFileNode, type LeafMaker } from '../../../main/packer/file-builder.ts';
import { makeFolderNode, type FolderEntry } from '../../../main/packer/folder-node.ts';
import { unixfsImporterOptions } from '../../../main/packer/index.ts';
import { unixfsDataBytes, withMtime } from '../../../main/packer/unixfs-data.ts';
import { cidText, RAW_CODEC } from '../../../main/protocol/index.ts';
import { memoryBlockstore } from '../../helpers/memory-blockstore.ts';

// ipfs-unixfs writes a 64-bit number from 2^31 to 2^32 - 1 as 0: a file's size of 2 to 4 GiB,
// an mtime from 2038 to 2106. Data as unixfsDataBytes writes it reads back as it was, and is
// byte for byte what ipfs-unixfs writes for every other value, so that no CID changes; so too a
// sharded folder's root.

const SECONDS = [
  0n,
  1n,
  1_700_000_000n,
  2_147_483_647n,
  2_147_483_648n,
  4_102_444_800n,
  4_294_967_295n,
  4_294_967_296n,
  2n ** 40n,
  -1n,
  -2_147_483_649n,
];
/** The seconds ipfs-unixfs writes wrong. */
const wrongInIpfsUnixfs = (secs: bigint): boolean => secs >= 2n ** 31n && secs < 2n ** 32n;

describe('unixfsDataBytes', () => {
  it('writes every time so it reads back, as ipfs-unixfs writes those it gets right', () => {
    for (const type of ['file', 'directory', 'symlink'] as const)
      for (const secs of SECONDS)
        for (const nsecs of [undefined, 0, 999_999_999]) {
          const mtime = nsecs === undefined ? { secs } : { secs, nsecs };
          const unixfs = new UnixFS({ type, mode: 0o700, mtime });
          if (type === 'file') unixfs.addBlockSize(1000n);
          const bytes = unixfsDataBytes(unixfs);
          const back = UnixFS.unmarshal(bytes);
          expect([type, back.mtime]).toEqual([type, { secs, nsecs }]);
          expect(back.mode).toBe(0o700);
          // Left as it was.
          expect(unixfs.mtime).toEqual(mtime);
          const stock = unixfs.marshal();
          expect([type, secs, nsecs, Buffer.from(bytes).equals(stock)]).toEqual([
            type,
            secs,
            nsecs,
            !wrongInIpfsUnixfs(secs),
          ]);
          if (wrongInIpfsUnixfs(secs)) {
            let stockSecs: bigint | undefined;
            try {
              stockSecs = UnixFS.unmarshal(stock).mtime?.secs;
            } catch {
              // Some of its wrong bytes do not even read as a message.
            }
            expect(stockSecs).not.toBe(secs);
          }
        }
  });

  it('writes the size of a file of 2 to 4 GiB, and each block size, as they are', () => {
    const threeGiB = new UnixFS({ type: 'file' });
    for (let block = 0; block < 3; block += 1) threeGiB.addBlockSize(1n << 30n);
    // Type 2; filesize 3 GiB; three blocksizes of 1 GiB: varints of 5 bytes each.
    expect(Buffer.from(unixfsDataBytes(threeGiB)).toString('hex')).toBe(
      `0802${'18808080800c'}${'208080808004'.repeat(3)}`,
    );
    // ipfs-unixfs writes the size as 0 and four zero bytes (and sums the block sizes when it
    // reads it back, which other tools do not).
    expect(Buffer.from(threeGiB.marshal()).subarray(2, 8).toString('hex')).toBe('180000000000');
    const oneBlock = new UnixFS({ type: 'file' });
    oneBlock.addBlockSize(2n ** 31n + 5n);
    expect(UnixFS.unmarshal(unixfsDataBytes(oneBlock)).blockSizes).toEqual([2n ** 31n + 5n]);
    expect(UnixFS.unmarshal(oneBlock.marshal()).blockSizes).toEqual([5n]);
  });

  it("gives a file of 3 GiB's File node its size, at the root of the importer's balanced layout", async () => {
    const leaf = CID.createV1(RAW_CODEC, await sha256.digest(new Uint8Array([2])));
    const store = memoryBlockstore();
    const leaves = (async function* (): AsyncGenerator<LeafMaker> {
      for (let chunk = 0; chunk < 3 * 1024; chunk += 1)
        yield await Promise.resolve(() => Promise.resolve({ cid: leaf, size: BigInt(1 << 20) }));
    })();
    const meta = { mode: 0o644, mtime: { secs: 1_700_000_000n, nsecs: 0 } };
    const layout = unixfsImporterOptions().layout;
    if (!layout) throw new Error('the UnixFS settings name no layout');
    const made = await buildFileNode(meta, leaves, store, layout);
    const root = dagPb.decode(store.blocks.get(cidText(made.cid)) ?? new Uint8Array());
    expect(root.Links).toHaveLength(3);
    const data = Buffer.from(root.Data ?? new Uint8Array());
    // Type 2, then filesize 3 GiB.
    expect(data.subarray(0, 8).toString('hex')).toBe('0802' + '18808080800c');
  });

  it("rewrites the time of another writer's Data, every other field kept, a HAMT's hashType too", () => {
    for (const secs of SECONDS) {
      const mtime = { secs, nsecs: 123 };
      const shard = new UnixFS({
        type: 'hamt-sharded-directory',
        data: new Uint8Array([1, 0, 2]),
        fanout: 256n,
        hashType: 0x22n,
        mode: 0o750,
        mtime,
      });
      expect(Buffer.from(withMtime(shard.marshal(), mtime)).toString('hex')).toBe(
        Buffer.from(unixfsDataBytes(shard)).toString('hex'),
      );
      expect(Buffer.from(unixfsDataBytes(shard)).includes(Buffer.from([0x28, 0x22]))).toBe(true);
    }
  });

  it("gives a sharded folder's root its time from 2038 on, at the size the importer made it", async () => {
    const leaf = CID.createV1(RAW_CODEC, await sha256.digest(new Uint8Array([1])));
    // Names of 180 characters shard a folder of about 1 400 entries (folder-node.test.ts).
    const entries: FolderEntry[] = Array.from({ length: 1600 }, (_, index) => ({
      name: `${'x'.repeat(180)}-${String(index).padStart(5, '0')}`,
      node: { cid: leaf, size: 1 },
    }));
    for (const secs of [2_200_000_000n, 1_600_000_000n]) {
      const store = memoryBlockstore();
      const meta = { mode: 0o750, mtime: { secs, nsecs: 5 } };
      const root = await makeFolderNode(meta, entries, store);
      const bytes = store.blocks.get(cidText(root.cid));
      expect(bytes).toBeDefined();
      const node = dagPb.decode(bytes ?? new Uint8Array());
      const unixfs = UnixFS.unmarshal(node.Data ?? new Uint8Array());
      expect(unixfs.type).toBe('hamt-sharded-directory');
      expect(unixfs.mtime).toEqual(meta.mtime);
      expect(root.size).toBe(
        (bytes?.length ?? 0) + node.Links.reduce((sum, link) => sum + (link.Tsize ?? 0), 0),
      );
    }
  });
});
