import { readCar } from '../../main/protocol/index.ts';
import * as dagCbor from '@ipld/dag-cbor';
import * as dagPb from '@ipld/dag-pb';
import type { CID } from 'multiformats/cid';
import { readFileSync, writeFileSync } from 'node:fs';

// A version's metadata CAR, as this computer keeps it, damaged on its disk: one byte of a node
// flipped. The CAR keeps its length, so the index of its nodes kept beside it still fits it, and
// the damage is found only when that node is read and no longer matches its CID.

/**
 * Flips the last byte of the node of `name` in the top folder of the version in `carFile`, or
 * of the top folder's own node when no name is given. Returns the CAR's bytes as they were.
 */
export async function damageNodeOf(carFile: string, name?: string): Promise<Buffer> {
  const whole = readFileSync(carFile);
  const blocks = new Map<string, { offset: number; length: number; bytes: Uint8Array }>();
  let root: CID | undefined;
  for await (const item of readCar(
    (async function* once() {
      yield await Promise.resolve(whole);
    })(),
    { maxBlockBytes: 4 << 20 },
  )) {
    if (item.type === 'header') continue;
    if (item.cid.code === dagCbor.code) root = dagCbor.decode<{ root: CID }>(item.bytes).root;
    else blocks.set(item.cid.toString(), item);
  }
  const top = root && blocks.get(root.toString());
  const link =
    name === undefined
      ? undefined
      : top && dagPb.decode(top.bytes).Links.find((each) => each.Name === name);
  const node = name === undefined ? top : link && blocks.get(link.Hash.toString());
  if (!node) throw new Error(`the node of ${name ?? 'the top folder'} is not in ${carFile}`);
  const damaged = Buffer.from(whole);
  const last = node.offset + node.length - 1;
  damaged[last] = (damaged[last] ?? 0) ^ 0xff;
  writeFileSync(carFile, damaged);
  return whole;
}
