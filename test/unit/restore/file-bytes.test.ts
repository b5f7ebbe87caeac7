import { randomBytes } from 'node:crypto';
import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { importer } from 'ipfs-unixfs-importer';
import { fixedSize } from 'ipfs-unixfs-importer/chunker';
import { balanced } from 'ipfs-unixfs-importer/layout';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { describe, expect, it } from 'vitest';
import { EngineError } from '../../../main/api/index.ts';
import {
  cidText,
  DAG_PB_CODEC,
  rawCidOf,
  UncheckedCarBlock,
} from '../../../main/protocol/index.ts';
import { fileBytes, Hole, type FileDag } from '../../../main/restore/file-bytes.ts';

/**
 * A DAG held in memory, counting the leaves asked for. Each leaf comes in two pieces, as a
 * leaf read from the network comes in the chunks it arrived in.
 */
class MemoryDag implements FileDag {
  readonly blocks = new Map<string, Uint8Array>();
  leavesAsked = 0;
  node(cid: CID): Uint8Array | undefined {
    return cid.code === DAG_PB_CODEC ? this.blocks.get(cidText(cid)) : undefined;
  }
  leaf(cid: CID): Promise<readonly Uint8Array[]> {
    this.leavesAsked += 1;
    const bytes = this.blocks.get(cidText(cid));
    if (!bytes) return Promise.reject(new Error('no such leaf'));
    const half = Math.floor(bytes.length / 2);
    return Promise.resolve([bytes.subarray(0, half), bytes.subarray(half)]);
  }
  put(cid: CID, bytes: Uint8Array): CID {
    this.blocks.set(cidText(cid), bytes);
    return cid;
  }
}

/** Imports `content` with small chunks and narrow nodes, so the file DAG is several levels deep. */
async function importFile(dag: MemoryDag, content: Uint8Array): Promise<CID> {
  const store = {
    put: (cid: CID, bytes: Uint8Array) => Promise.resolve(dag.put(cid, bytes)),
  };
  let root: CID | undefined;
  for await (const entry of importer([{ content }], store, {
    cidVersion: 1,
    rawLeaves: true,
    reduceSingleLeafToSelf: false,
    chunker: fixedSize({ chunkSize: 1024 }),
    layout: balanced({ maxChildrenPerNode: 3 }),
  }))
    root = entry.cid;
  if (!root) throw new Error('nothing imported');
  return root;
}

async function readAll(root: CID, dag: FileDag): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of fileBytes(root, dag)) {
    if (part instanceof Hole) parts.push(new Uint8Array(part.length));
    else parts.push(...(part instanceof UncheckedCarBlock ? part.check().pieces : part));
  }
  return Buffer.concat(parts);
}

/** A File node of its own making: `links` with the block sizes it claims for them. */
async function fileNode(
  dag: MemoryDag,
  links: Array<{ cid: CID; claimed: number }>,
  data?: Uint8Array,
): Promise<CID> {
  const unixfs = new UnixFS({
    type: 'file',
    blockSizes: links.map((link) => BigInt(link.claimed)),
    ...(data ? { data } : {}),
  });
  const bytes = dagPb.encode({
    Data: unixfs.marshal(),
    Links: links.map((link) => ({ Hash: link.cid, Tsize: link.claimed })),
  });
  return dag.put(CID.createV1(DAG_PB_CODEC, await sha256.digest(bytes)), bytes);
}

async function leaf(dag: MemoryDag, bytes: Uint8Array): Promise<CID> {
  return dag.put(await rawCidOf(bytes), bytes);
}

async function protocolError(promise: Promise<unknown>): Promise<string> {
  const error: unknown = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(EngineError);
  expect((error as EngineError).code).toBe('protocol');
  return (error as EngineError).message;
}

describe('fileBytes', () => {
  it('gives back the bytes of a file DAG several levels deep, in order', async () => {
    const dag = new MemoryDag();
    const content = randomBytes(50 * 1024 + 17);
    const root = await importFile(dag, content);
    expect((await readAll(root, dag)).equals(content)).toBe(true);
    expect(dag.leavesAsked).toBe(51);
  });

  it('asks for the next leaf only once the reader has taken the one before', async () => {
    const dag = new MemoryDag();
    const root = await importFile(dag, randomBytes(20 * 1024));
    const reader = fileBytes(root, dag);
    await reader.next();
    await reader.next();
    expect(dag.leavesAsked).toBe(2);
    await reader.return(undefined);
  });

  it("includes a node's own data ahead of its links", async () => {
    const dag = new MemoryDag();
    const tail = Buffer.from(' world');
    const root = await fileNode(
      dag,
      [{ cid: await leaf(dag, tail), claimed: tail.length }],
      Buffer.from('hello'),
    );
    expect((await readAll(root, dag)).toString()).toBe('hello world');
  });

  it('refuses a leaf whose size is not the one its parent states', async () => {
    const dag = new MemoryDag();
    const root = await fileNode(dag, [{ cid: await leaf(dag, randomBytes(5)), claimed: 10 }]);
    expect(await protocolError(readAll(root, dag))).toMatch(/leaf 0 has 5 bytes, not 10/);
  });

  it('refuses a node whose links and block sizes differ in number', async () => {
    const dag = new MemoryDag();
    const unixfs = new UnixFS({ type: 'file', blockSizes: [5n, 5n] });
    const bytes = dagPb.encode({
      Data: unixfs.marshal(),
      Links: [{ Hash: await leaf(dag, randomBytes(5)), Tsize: 5 }],
    });
    const root = dag.put(CID.createV1(DAG_PB_CODEC, await sha256.digest(bytes)), bytes);
    expect(await protocolError(readAll(root, dag))).toMatch(/links and block sizes differ/);
  });

  it('refuses a node that is not a file, and a link to a node the metadata lacks', async () => {
    const dag = new MemoryDag();
    const directory = dagPb.encode({
      Data: new UnixFS({ type: 'directory' }).marshal(),
      Links: [],
    });
    const directoryCid = dag.put(
      CID.createV1(DAG_PB_CODEC, await sha256.digest(directory)),
      directory,
    );
    expect(await protocolError(readAll(directoryCid, dag))).toMatch(/a directory/);
    const missing = CID.createV1(DAG_PB_CODEC, await sha256.digest(randomBytes(8)));
    const root = await fileNode(dag, [{ cid: missing, claimed: 8 }]);
    expect(await protocolError(readAll(root, dag))).toMatch(/lacks node/);
  });

  it('refuses a link of another codec, and a file deeper than any real layout', async () => {
    const dag = new MemoryDag();
    const cbor = CID.createV1(0x71, (await rawCidOf(Buffer.from('x'))).multihash);
    const odd = await fileNode(dag, [{ cid: cbor, claimed: 1 }]);
    expect(await protocolError(readAll(odd, dag))).toMatch(/link 0 has codec 113/);
    // A chain of 40 File nodes, each the only link of the one above, over one 3-byte leaf.
    let deep = await fileNode(dag, [{ cid: await leaf(dag, Buffer.from('abc')), claimed: 3 }]);
    for (let level = 0; level < 40; level += 1)
      deep = await fileNode(dag, [{ cid: deep, claimed: 3 }]);
    expect(await protocolError(readAll(deep, dag))).toMatch(/deeper than 32 levels/);
  });
});
