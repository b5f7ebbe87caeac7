import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { CID } from 'multiformats/cid';
import * as Digest from 'multiformats/hashes/digest';
import {
  cidFromSha256,
  DAG_CBOR_CODEC,
  DAG_PB_CODEC,
  DagPbLinks,
  RAW_CODEC,
} from '../../../main/protocol/index.ts';

function digestOf(text: string): Uint8Array {
  return createHash('sha256').update(text).digest();
}

/** What @ipld/dag-pb reads of a node's links: codec, digest (hex) and Tsize. */
function decoded(bytes: Uint8Array): Array<[number, string, number]> {
  return dagPb
    .decode(bytes)
    .Links.map((link) => [
      link.Hash.code,
      Buffer.from(link.Hash.multihash.digest).toString('hex'),
      link.Tsize ?? 0,
    ]);
}

/** The same, as DagPbLinks reads it; undefined when it does not read the node. */
function read(bytes: Uint8Array): Array<[number, string, number]> | undefined {
  const links = new DagPbLinks();
  const count = links.read(bytes);
  if (count < 0) return undefined;
  return Array.from({ length: count }, (_, index) => [
    links.codecs[index] ?? -1,
    Buffer.from(links.digest(index)).toString('hex'),
    links.tsizes[index] ?? -1,
  ]);
}

describe('DagPbLinks', () => {
  it('reads the links @ipld/dag-pb reads, from folders, files and empty nodes', () => {
    const folder = dagPb.encode(
      dagPb.prepare({
        Data: new UnixFS({ type: 'directory', mtime: { secs: 1n, nsecs: 5 } }).marshal(),
        Links: [
          { Name: 'a', Hash: cidFromSha256(DAG_PB_CODEC, digestOf('a')), Tsize: 120 },
          { Name: 'café\nné', Hash: cidFromSha256(RAW_CODEC, digestOf('b')), Tsize: 2 ** 40 + 3 },
          { Name: '', Hash: cidFromSha256(DAG_CBOR_CODEC, digestOf('c')), Tsize: 0 },
          { Hash: cidFromSha256(RAW_CODEC, digestOf('d')) },
        ],
      }),
    );
    const file = dagPb.encode(
      dagPb.prepare({
        Data: new UnixFS({ type: 'file', blockSizes: [1_048_576n, 7n] }).marshal(),
        Links: [
          { Hash: cidFromSha256(RAW_CODEC, digestOf('1')), Tsize: 1_048_576 },
          { Hash: cidFromSha256(RAW_CODEC, digestOf('2')), Tsize: 7 },
        ],
      }),
    );
    const empty = dagPb.encode(dagPb.prepare({ Data: new Uint8Array() }));
    const bare = dagPb.encode(dagPb.prepare({}));
    for (const node of [folder, file, empty, bare]) expect(read(node)).toEqual(decoded(node));
    expect(read(folder)).toHaveLength(4);
    // dag-pb sorts links by name; a Tsize past 32 bits reads whole.
    expect(read(folder)?.map(([, , tsize]) => tsize)).toContain(2 ** 40 + 3);
  });

  it('does not read links of another shape, nor bytes that are no node', () => {
    const cidV0 = CID.createV0(Digest.create(0x12, digestOf('v0')));
    const sha512 = CID.createV1(
      RAW_CODEC,
      Digest.create(0x13, createHash('sha512').update('x').digest()),
    );
    for (const hash of [cidV0, sha512]) {
      const node = dagPb.encode(dagPb.prepare({ Links: [{ Hash: hash, Tsize: 1 }] }));
      expect(decoded(node)).toHaveLength(1);
      expect(read(node)).toBeUndefined();
    }
    const whole = dagPb.encode(
      dagPb.prepare({ Links: [{ Name: 'x', Hash: cidFromSha256(RAW_CODEC, digestOf('x')) }] }),
    );
    for (let end = 1; end < whole.length; end++)
      expect(read(whole.subarray(0, end)), `cut at ${end}`).toBeUndefined();
    expect(read(Uint8Array.from([0x08, 0x01]))).toBeUndefined();
  });

  it('does not read a node @ipld/dag-pb refuses for its Data: given twice, or between links', () => {
    const link = dagPb.encode(
      dagPb.prepare({ Links: [{ Name: 'x', Hash: cidFromSha256(RAW_CODEC, digestOf('x')) }] }),
    );
    const data = dagPb.encode(dagPb.prepare({ Data: new UnixFS({ type: 'file' }).marshal() }));
    const joined = (...parts: Uint8Array[]): Uint8Array => Uint8Array.from(Buffer.concat(parts));
    // Data first, then links: read by both.
    const dataThenLink = joined(data, link);
    expect(read(dataThenLink)).toEqual(decoded(dataThenLink));
    for (const node of [joined(data, data), joined(link, data, link)]) {
      expect(() => dagPb.decode(node)).toThrow();
      expect(read(node)).toBeUndefined();
    }
  });
});
