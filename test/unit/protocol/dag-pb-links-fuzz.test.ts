import { describe, expect, it } from 'vitest';
import * as dagPb from '@ipld/dag-pb';
import fc from 'fast-check';
import { DagPbLinks } from '../../../main/protocol/index.ts';
import { hostileDagPb } from '../../helpers/hostile-dag-pb.ts';
import { HOSTILE_INPUT_RUNS } from '../../helpers/hostile-runs.ts';

// DagPbLinks reads dag-pb nodes by hand, for speed, and hands anything it does not take to
// @ipld/dag-pb. A node it reads must therefore be one @ipld/dag-pb reads too, with the same
// links and Data: the nodes come from the service, and a hostile or damaged one (its CID still
// checks) must not mean one thing to Canopy and another to every other UnixFS tool.

/** What @ipld/dag-pb reads of a node, or undefined when it refuses it. */
function decodedByDagPb(bytes: Uint8Array): dagPb.PBNode | undefined {
  try {
    return dagPb.decode(bytes);
  } catch {
    return undefined;
  }
}

describe('DagPbLinks against @ipld/dag-pb', () => {
  it('reads no node @ipld/dag-pb refuses, and reads each it takes as @ipld/dag-pb does', () => {
    const links = new DagPbLinks();
    const lenient = new TextDecoder();
    const anyData = fc.uint8Array({ maxLength: 12 }).map((bytes) => [...bytes]);
    fc.assert(
      fc.property(hostileDagPb(anyData), (bytes) => {
        const count = links.read(bytes);
        if (count < 0) return;
        const decoded = decodedByDagPb(bytes);
        expect(decoded, `read ${Buffer.from(bytes).toString('hex')}`).toBeDefined();
        if (!decoded) return;
        expect(count).toBe(decoded.Links.length);
        decoded.Links.forEach((link, index) => {
          expect(links.codecs[index]).toBe(link.Hash.code);
          expect(link.Hash.multihash.code).toBe(0x12);
          expect(Buffer.from(links.digest(index))).toEqual(Buffer.from(link.Hash.multihash.digest));
          expect(links.tsizes[index]).toBe(link.Tsize ?? 0);
          expect(lenient.decode(links.name(index))).toBe(link.Name ?? '');
        });
        if (decoded.Data === undefined) expect(links.dataLength).toBe(-1);
        else
          expect(
            Buffer.from(bytes.subarray(links.dataAt, links.dataAt + links.dataLength)),
          ).toEqual(Buffer.from(decoded.Data));
      }),
      HOSTILE_INPUT_RUNS,
    );
  });
});
