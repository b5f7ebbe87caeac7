import { describe, expect, it } from 'vitest';
import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import type { CID } from 'multiformats/cid';
import { DAG_PB_CODEC, RAW_CODEC, sha256CidOf } from '../../../main/protocol/index.ts';
import { quickShapeOf, shapeOfNodeQuickly } from '../../../main/restore/quick-shape.ts';
import { shapeOfNode, type NodeLookup } from '../../../main/restore/walk-tree.ts';
import fc from 'fast-check';
import { hostileDagPb, unixfsData } from '../../helpers/hostile-dag-pb.ts';
import { HOSTILE_INPUT_RUNS } from '../../helpers/hostile-runs.ts';

/** Nodes by CID, as a version's tree holds them. */
class Nodes implements NodeLookup {
  private readonly byCid = new Map<string, Uint8Array>();

  add(bytes: Uint8Array): CID {
    const cid = sha256CidOf(DAG_PB_CODEC, bytes);
    this.byCid.set(cid.toString(), bytes);
    return cid;
  }

  get(cid: CID): Uint8Array | undefined {
    return this.byCid.get(cid.toString());
  }
}

const leaf = (text: string): CID => sha256CidOf(RAW_CODEC, new TextEncoder().encode(text));

/** A node of `data` and these links. */
function node(data: Uint8Array, links: dagPb.PBLink[] = []): Uint8Array {
  return dagPb.encode(dagPb.prepare({ Data: data, Links: links }));
}

/** What the full decode says of a node, or the error it throws. */
function slowShape(cid: CID, nodes: Nodes): unknown {
  try {
    const shape = shapeOfNode(cid, nodes);
    return shape.kind === 'directory' ? 'directory' : shape;
  } catch (error) {
    return error;
  }
}

describe('quickShapeOf', () => {
  it('reads files and links as the full decode does', () => {
    const nodes = new Nodes();
    const written = [
      // A file of two leaves, with mode and time, as a backup writes it.
      node(
        new UnixFS({
          type: 'file',
          blockSizes: [1_048_576n, 7n],
          mode: 0o755,
          mtime: { secs: 1_700_000_000n, nsecs: 123 },
        }).marshal(),
        [
          { Hash: leaf('1'), Tsize: 1_048_576 },
          { Hash: leaf('2'), Tsize: 7 },
        ],
      ),
      // An empty file, a file holding its bytes itself, and both at once.
      node(new UnixFS({ type: 'file' }).marshal()),
      node(new UnixFS({ type: 'file', data: new Uint8Array(300) }).marshal()),
      node(new UnixFS({ type: 'file', data: new Uint8Array(5), blockSizes: [9n] }).marshal(), [
        { Hash: leaf('3'), Tsize: 9 },
      ]),
      node(new UnixFS({ type: 'raw', data: new Uint8Array(11) }).marshal()),
      // A file past 4 GiB: its sizes are past 32 bits.
      node(new UnixFS({ type: 'file', blockSizes: [2n ** 33n, 2n ** 32n + 1n] }).marshal(), [
        { Hash: leaf('4'), Tsize: 2 ** 33 },
        { Hash: leaf('5'), Tsize: 2 ** 32 + 1 },
      ]),
      node(new UnixFS({ type: 'symlink', data: new TextEncoder().encode('../target') }).marshal()),
    ];
    for (const bytes of written) {
      const cid = nodes.add(bytes);
      const quick = quickShapeOf(bytes);
      expect(quick).toBeDefined();
      expect(quick).toEqual(slowShape(cid, nodes));
      expect(shapeOfNodeQuickly(cid, nodes)).toEqual(quick);
    }
    expect(quickShapeOf(written[5]!)).toEqual({
      kind: 'file',
      size: 2n ** 33n + 2n ** 32n + 1n,
    });
  });

  it('leaves folders, and anything not of the shape written, to the full decode', () => {
    const nodes = new Nodes();
    const folder = node(new UnixFS({ type: 'directory' }).marshal(), [
      { Name: 'a', Hash: leaf('a'), Tsize: 1 },
    ]);
    const shard = node(new UnixFS({ type: 'hamt-sharded-directory', fanout: 256n }).marshal());
    // Block sizes packed (a field of length, which ipfs-unixfs does not read so), Data given
    // twice, a field cut short, no UnixFS data at all, and bytes that are no node.
    const packed = node(Uint8Array.from([0x08, 0x02, 0x22, 0x02, 0x05, 0x06]));
    const dataTwice = node(Uint8Array.from([0x08, 0x02, 0x12, 0x01, 0x61, 0x12, 0x01, 0x62]));
    const cut = node(Uint8Array.from([0x08, 0x02, 0x12, 0x05, 0x61]));
    const noData = dagPb.encode(dagPb.prepare({ Links: [{ Hash: leaf('x'), Tsize: 1 }] }));
    const notANode = Uint8Array.from([0xff, 0xff, 0xff]);
    for (const bytes of [folder, shard, packed, dataTwice, cut, noData, notANode]) {
      expect(quickShapeOf(bytes)).toBeUndefined();
      // Decoded whole: a folder, or the damage the full decode finds.
      const cid = nodes.add(bytes);
      const whole = slowShape(cid, nodes);
      if (whole instanceof Error) expect(() => shapeOfNodeQuickly(cid, nodes)).toThrow(whole);
      else
        expect(shapeOfNodeQuickly(cid, nodes).kind).toBe(
          whole === 'directory' ? 'directory' : 'file',
        );
    }
    // A raw leaf where a node belongs, or a node the tree lacks, is damage as before.
    for (const cid of [leaf('raw'), sha256CidOf(DAG_PB_CODEC, Uint8Array.of(1))]) {
      const whole = slowShape(cid, nodes);
      expect(whole).toBeInstanceOf(Error);
      expect(() => shapeOfNodeQuickly(cid, nodes)).toThrow((whole as Error).message);
    }
  });

  // The count of a tree (tree-totals.ts), which stops a tree that stands for more than any disk
  // holds, reads nodes this way; the walk that then restores or lists them decodes them whole.
  // A node that is one thing to the count and another to the walk (a file to one, a folder to
  // the other) would let such a tree past the count. Damage inside a field the count skips (a
  // time) shows once the walk decodes the node.
  it('reads no node as other than the full decode does, however it is made or damaged', () => {
    const nodes = new Nodes();
    fc.assert(
      fc.property(hostileDagPb(unixfsData), (bytes) => {
        const quick = quickShapeOf(bytes);
        if (quick === undefined) return;
        const whole = slowShape(nodes.add(bytes), nodes);
        if (!(whole instanceof Error))
          expect(whole, Buffer.from(bytes).toString('hex')).toEqual(quick);
      }),
      HOSTILE_INPUT_RUNS,
    );
  });
});
