import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { recursive } from 'ipfs-unixfs-exporter';
import type { ImportCandidate } from 'ipfs-unixfs-importer';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { describe, expect, it } from 'vitest';
import { EngineError } from '../../../main/api/index.ts';
import { MetadataNodes } from '../../../main/packer/index.ts';
import { DAG_PB_CODEC, rawCidOf } from '../../../main/protocol/index.ts';
import { walkTree } from '../../../main/restore/walk-tree.ts';
import { importedTree } from '../../helpers/imported-tree.ts';

/** Imports `candidates` into memory; HAMT sharding starts at a few entries. */
function importTree(candidates: ImportCandidate[]) {
  return importedTree(candidates, { shardSplitThresholdBytes: 200, shardFanoutBits: 4 });
}

async function nodeOf(nodes: MetadataNodes, node: dagPb.PBNode): Promise<CID> {
  const bytes = dagPb.encode(node);
  const cid = CID.createV1(DAG_PB_CODEC, await sha256.digest(bytes));
  nodes.put(cid, bytes);
  return cid;
}

describe('walkTree', () => {
  it("lists the exporter's entries, sharded folders included, each folder before its contents", async () => {
    const mtime = { secs: 1_400_000_000n, nsecs: 0 };
    const candidates: ImportCandidate[] = [
      { path: 'root', mode: 0o755, mtime },
      { path: 'root/many', mode: 0o700, mtime },
      { path: 'root/link', link: 'many/f1', mtime },
    ];
    for (let index = 0; index < 60; index += 1)
      candidates.push({ path: `root/many/f${index}`, content: Buffer.from(`file ${index}`) });
    candidates.push({ path: 'root/many/sub/deep.txt', content: Buffer.from('deep') });
    const { root, nodes } = await importTree(candidates);
    // The folder of 60 is sharded, and some of its buckets are sub-shards (a one-hex-digit name).
    const shardLinks = [...nodes.sorted()]
      .map(({ bytes }) => dagPb.decode(bytes))
      .filter((node) => node.Data && UnixFS.unmarshal(node.Data).type === 'hamt-sharded-directory')
      .flatMap((node) => node.Links.map((link) => link.Name ?? ''));
    expect(shardLinks.some((name) => name.length === 1)).toBe(true);
    const ours = [...walkTree(root, nodes)];
    expect(ours.some((entry) => entry.parts.join('/') === 'many')).toBe(true);
    const store = {
      // eslint-disable-next-line @typescript-eslint/require-await -- the exporter's contract is async
      async *get(cid: CID) {
        const bytes = nodes.get(cid);
        if (!bytes) throw new Error('not metadata');
        yield bytes;
      },
    };
    const theirs: string[] = [];
    for await (const entry of recursive(root, store))
      theirs.push(entry.path.split('/').slice(1).join('/'));
    expect(ours.map((entry) => entry.parts.join('/')).sort()).toEqual(theirs.sort());
    const seen = new Set<string>();
    for (const entry of ours) {
      expect(seen.has(entry.parts.slice(0, -1).join('/')) || entry.parts.length === 0).toBe(true);
      seen.add(entry.parts.join('/'));
    }
    expect(ours.find((entry) => entry.parts.join('/') === 'many')).toMatchObject({
      kind: 'directory',
      mode: 0o700,
      mtimeWholeSeconds: 1_400_000_000,
      mtimeNanoseconds: 1_400_000_000_000_000_000n,
    });
    expect(ours.find((entry) => entry.parts.join('/') === 'link')).toMatchObject({
      kind: 'symlink',
      target: 'many/f1',
    });
  });

  it('in name order goes path by path as their names sort in UTF-8, name by name, sharded folders too', async () => {
    // UTF-16 sorts U+FF61 after the surrogates of U+1F600, UTF-8 before; "a-b" sorts before
    // "a/x" as text, after it name by name; a folder of 60 is sharded, in the order of hashes.
    const names = ['a', 'a-b', 'Z', 'é', '\uff61', '\u{1f600}', 'a b'];
    const candidates: ImportCandidate[] = [{ path: 'root' }, { path: 'root/a' }];
    for (const name of names.slice(1))
      candidates.push({ path: `root/${name}`, content: Buffer.from(name) });
    for (const name of names)
      candidates.push({ path: `root/a/${name}.txt`, content: Buffer.from(name) });
    for (let index = 0; index < 60; index += 1)
      candidates.push({ path: `root/a-b.d/f${index}`, content: Buffer.from(`file ${index}`) });
    const { root, nodes } = await importTree(candidates);
    const walked = [...walkTree(root, nodes, [], Number.POSITIVE_INFINITY, 'names')].map(
      (entry) => entry.parts,
    );
    const byNames = (a: readonly string[], b: readonly string[]): number => {
      for (let index = 0; index < Math.min(a.length, b.length); index += 1) {
        const order = Buffer.compare(Buffer.from(a[index] ?? ''), Buffer.from(b[index] ?? ''));
        if (order !== 0) return order;
      }
      return a.length - b.length;
    };
    expect(walked).toHaveLength(1 + names.length * 2 + 1 + 60);
    expect(walked).toEqual([...walked].sort(byNames));
    expect(walked.slice(0, 4).map((parts) => parts.join('/'))).toEqual(['', 'Z', 'a', 'a/Z.txt']);
    // In link order, the sharded folder's entries come as their hashes fall.
    const inLinkOrder = [...walkTree(root, nodes)].map((entry) => entry.parts);
    expect(inLinkOrder).not.toEqual([...inLinkOrder].sort(byNames));
  });

  it("reads a sharded folder's sub-shards only as the walk comes to them", async () => {
    const candidates: ImportCandidate[] = [{ path: 'root' }, { path: 'root/many' }];
    for (let index = 0; index < 400; index += 1)
      candidates.push({ path: `root/many/f${index}`, content: Buffer.from(`file ${index}`) });
    const { root, nodes } = await importTree(candidates);
    const shards = new Set(
      [...nodes.sorted()]
        .filter(({ bytes }) => {
          const data = dagPb.decode(bytes).Data;
          return data !== undefined && UnixFS.unmarshal(data).type === 'hamt-sharded-directory';
        })
        .map(({ cid }) => cid.toString()),
    );
    let shardsRead = 0;
    const counted = {
      get: (cid: CID) => {
        if (shards.has(cid.toString())) shardsRead += 1;
        return nodes.get(cid);
      },
    };
    const walk = walkTree(root, counted);
    let first = walk.next();
    while (first.done !== true && first.value.parts.length < 2) first = walk.next();
    // The folder's own shard, and the few sub-shards on the way to its first entry.
    expect(first.value?.parts[0]).toBe('many');
    expect(shards.size).toBeGreaterThan(10);
    expect(shardsRead).toBeLessThanOrEqual(3);
    const rest = [...walk];
    expect(rest.length + 1).toBe(400);
    expect(shardsRead).toBe(shards.size);
  });

  it('walks only the entry at a path and what it holds, through plain and sharded folders', async () => {
    const candidates: ImportCandidate[] = [{ path: 'root' }, { path: 'root/many' }];
    for (let index = 0; index < 60; index += 1) {
      candidates.push({ path: `root/many/f${index}`, content: Buffer.from(`file ${index}`) });
      candidates.push({ path: `root/other/g${index}`, content: Buffer.from(`other ${index}`) });
    }
    candidates.push({ path: 'root/many/sub/deep.txt', content: Buffer.from('deep') });
    candidates.push({ path: 'root/many/sub/more/deeper.txt', content: Buffer.from('deeper') });
    const { root, nodes } = await importTree(candidates);
    let read = 0;
    const counted = {
      get: (cid: CID) => {
        read += 1;
        return nodes.get(cid);
      },
    };
    const walk = (...under: string[]): string[] =>
      [...walkTree(root, counted, under)].map((entry) => entry.parts.join('/'));

    // The folder under the sharded one, named from the root, and nothing beside it.
    expect(walk('many', 'sub')).toEqual([
      'many/sub',
      'many/sub/deep.txt',
      'many/sub/more',
      'many/sub/more/deeper.txt',
    ]);
    expect(walk('many', 'f7')).toEqual(['many/f7']);
    const all = [...walkTree(root, nodes)].map((entry) => entry.parts.join('/'));
    expect(walk('many').sort()).toEqual(all.filter((name) => name.startsWith('many')).sort());
    // One file of 120 reads the folders on its way and their shards, not the other files.
    read = 0;
    expect(walk('other', 'g3')).toEqual(['other/g3']);
    expect(read).toBeLessThan(20);
    // One level: the folder and what it holds itself, the sharded one's entries all there,
    // reading none of the nodes below its subfolder.
    read = 0;
    const oneLevel = [...walkTree(root, counted, ['many'], 1)].map((entry) =>
      entry.parts.join('/'),
    );
    expect(oneLevel.sort()).toEqual(
      all.filter((name) => name === 'many' || /^many\/[^/]+$/.test(name)).sort(),
    );
    expect(oneLevel).toHaveLength(62);
    const readForOneLevel = read;
    read = 0;
    expect(walk('many').length).toBeGreaterThan(oneLevel.length);
    expect(read).toBeGreaterThan(readForOneLevel);
    // No such name, a name under a file, a name under a link: nothing.
    expect(walk('many', 'f60')).toEqual([]);
    expect(walk('many', 'f7', 'x')).toEqual([]);
    expect(walk('nowhere', 'f7')).toEqual([]);
  });

  it('refuses a folder that links a bare leaf or a node the metadata lacks', async () => {
    const nodes = new MetadataNodes();
    const directory = (name: string, hash: CID) =>
      nodeOf(nodes, {
        Data: new UnixFS({ type: 'directory' }).marshal(),
        Links: [{ Name: name, Hash: hash, Tsize: 1 }],
      });
    const bare = await directory('bare', await rawCidOf(Buffer.from('x')));
    expect(() => [...walkTree(bare, nodes)]).toThrow(EngineError);
    expect(() => [...walkTree(bare, nodes)]).toThrow(/not a dag-pb node/);
    const absent = CID.createV1(DAG_PB_CODEC, await sha256.digest(Buffer.from('absent')));
    const lacking = await directory('gone', absent);
    expect(() => [...walkTree(lacking, nodes)]).toThrow(/lacks node/);
  });

  it('tells the whole seconds of a time exactly, a nanosecond before the next second too', async () => {
    const nodes = new MetadataNodes();
    const mtime = { secs: 1_795_803_004n, nsecs: 999_999_999 };
    const file = await nodeOf(nodes, {
      Data: new UnixFS({ type: 'file', mtime }).marshal(),
      Links: [],
    });
    const [entry] = [...walkTree(file, nodes)];
    // As a double, the seconds and their fraction round up to the next second.
    expect(1_795_803_004 + 999_999_999 / 1e9).toBe(1_795_803_005);
    expect(entry?.mtimeWholeSeconds).toBe(1_795_803_004);
    expect(entry?.mtimeNanoseconds).toBe(1_795_803_004_999_999_999n);
  });

  it('refuses a HAMT shard whose link names do not fit its fanout', async () => {
    const nodes = new MetadataNodes();
    const file = await nodeOf(nodes, { Data: new UnixFS({ type: 'file' }).marshal(), Links: [] });
    const shard = (name: string) =>
      nodeOf(nodes, {
        Data: new UnixFS({ type: 'hamt-sharded-directory', fanout: 256n }).marshal(),
        Links: [{ Name: name, Hash: file, Tsize: 1 }],
      });
    // Fanout 256: every name starts with two hex digits; a name of just those is a sub-shard.
    const fine = [...walkTree(await shard('0Anote.txt'), nodes)];
    expect(fine.map((entry) => entry.parts.join('/'))).toEqual(['', 'note.txt']);
    const bad = await shard('A');
    expect(() => [...walkTree(bad, nodes)]).toThrow(/HAMT link named "A"/);
  });
});
