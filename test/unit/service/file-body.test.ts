import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fileBody } from '../../../main/service/file-body.ts';

const MiB = 1 << 20;
let dir: string;

afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of stream) parts.push(part);
  return Buffer.concat(parts);
}

describe('fileBody (a shard upload body read as the connection takes it)', () => {
  it('yields the file byte for byte and reports the bytes handed on after each chunk', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-body-'));
    const file = path.join(dir, 'shard.car');
    const bytes = randomBytes(2 * MiB + 12_345);
    writeFileSync(file, bytes);
    const sent: number[] = [];
    expect((await readAll(fileBody(file, (count) => sent.push(count)))).equals(bytes)).toBe(true);
    expect(sent).toEqual([MiB, 2 * MiB, 2 * MiB + 12_345]);
  });

  it('reads nothing ahead of the reader beyond one chunk', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-body-'));
    const file = path.join(dir, 'shard.car');
    writeFileSync(file, randomBytes(8 * MiB));
    const sent: number[] = [];
    const reader = fileBody(file, (count) => sent.push(count)).getReader();
    await reader.read();
    // Give any eager reading a chance to run before looking.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(sent.at(-1)).toBeLessThanOrEqual(2 * MiB);
    await reader.cancel();
  });

  it('fails the stream with the file error when the staged shard is gone', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-body-'));
    await expect(readAll(fileBody(path.join(dir, 'missing.car')))).rejects.toMatchObject({
      code: 'ENOENT',
    });
  });
});
