import { CarWriter } from '@ipld/car/writer';
import * as dagCbor from '@ipld/dag-cbor';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { randomBytes } from 'node:crypto';

// Building CARs and multipart bodies for tests, with @ipld/car as the reference writer.

export interface Block {
  readonly cid: CID;
  readonly bytes: Uint8Array;
}

export async function rawBlock(bytes: Uint8Array = randomBytes(1024)): Promise<Block> {
  return { cid: CID.createV1(0x55, await sha256.digest(bytes)), bytes };
}

export async function cborBlock(value: unknown): Promise<Block> {
  const bytes = dagCbor.encode(value);
  return { cid: CID.createV1(dagCbor.code, await sha256.digest(bytes)), bytes };
}

export async function carBytes(
  roots: readonly CID[],
  blocks: readonly Block[],
): Promise<Uint8Array> {
  const { writer, out } = CarWriter.create([...roots]);
  const chunks: Uint8Array[] = [];
  const collected = (async () => {
    for await (const chunk of out) chunks.push(chunk);
  })();
  for (const block of blocks) await writer.put(block);
  await writer.close();
  await collected;
  return new Uint8Array(Buffer.concat(chunks));
}

/** A CARv2 around `inner`: pragma, header, `padding` zero bytes, the CARv1, then index bytes. */
export function carV2(inner: Uint8Array, padding: number): Uint8Array {
  const pragma = Buffer.from('0aa16776657273696f6e02', 'hex');
  const header = Buffer.alloc(40);
  const dataOffset = pragma.length + 40 + padding;
  header.writeBigUInt64LE(BigInt(dataOffset), 16);
  header.writeBigUInt64LE(BigInt(inner.length), 24);
  header.writeBigUInt64LE(BigInt(dataOffset + inner.length), 32);
  return Buffer.concat([
    pragma,
    header,
    Buffer.alloc(padding),
    inner,
    Buffer.from('index bytes are ignored'),
  ]);
}

/** A metadata CAR: a dag-cbor manifest as its single root (the content does not matter here). */
export async function metadataCar(
  label = 'test',
): Promise<{ cid: CID; car: Uint8Array; root: CID }> {
  const root = (await rawBlock(randomBytes(16))).cid;
  const manifest = await cborBlock({
    version: 1,
    root,
    source_label: label,
    nonce: randomBytes(8),
  });
  return { cid: manifest.cid, root, car: await carBytes([manifest.cid], [manifest]) };
}

export async function shardOf(blocks: readonly Block[]): Promise<{ cid: CID; car: Uint8Array }> {
  const car = await carBytes(blocks.length > 0 && blocks[0] ? [blocks[0].cid] : [], blocks);
  return { cid: CID.createV1(0x55, await sha256.digest(car)), car };
}

export interface MultipartPartInput {
  name: string;
  contentType?: string;
  body: Uint8Array | string;
}

export function multipartBody(parts: readonly MultipartPartInput[]): {
  body: Uint8Array;
  contentType: string;
} {
  const boundary = `----canopy${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"\r\n`;
    if (part.contentType !== undefined) head += `Content-Type: ${part.contentType}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`), Buffer.from(part.body), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return {
    body: new Uint8Array(Buffer.concat(chunks)),
    contentType: `multipart/form-data; boundary=${boundary}`,
  };
}
