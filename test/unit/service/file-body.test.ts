import { randomBytes } from 'node:crypto';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
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

/** How far this process has read into `file`, by the one descriptor it holds open on it. */
function readOffsetOf(file: string): number {
  const fds = readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === file;
    } catch {
      // A descriptor closed since the folder was listed (the listing's own).
      return false;
    }
  });
  expect(fds).toHaveLength(1);
  const info = readFileSync(`/proc/self/fdinfo/${fds[0] ?? ''}`, 'utf8');
  return Number(/^pos:\s+(\d+)$/m.exec(info)?.[1]);
}

describe('fileBody (a shard upload body read as the connection takes it)', () => {
  it('yields the file byte for byte, a MiB at a time', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-body-'));
    const file = path.join(dir, 'shard.car');
    const bytes = randomBytes(2 * MiB + 12_345);
    writeFileSync(file, bytes);
    const chunks: number[] = [];
    const read: Uint8Array[] = [];
    for await (const chunk of fileBody(file)) {
      chunks.push(chunk.length);
      read.push(chunk);
    }
    expect(Buffer.concat(read).equals(bytes)).toBe(true);
    expect(chunks).toEqual([MiB, MiB, 12_345]);
  });

  it('reads nothing ahead of the reader beyond one chunk', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-body-'));
    const file = path.join(dir, 'shard.car');
    writeFileSync(file, randomBytes(8 * MiB));
    const reader = fileBody(file).getReader();
    await reader.read();
    // Give any eager reading a chance to run before looking.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(readOffsetOf(file)).toBeLessThanOrEqual(2 * MiB);
    await reader.cancel();
  });

  it('fails the stream with the file error when the staged shard is gone', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-body-'));
    await expect(readAll(fileBody(path.join(dir, 'missing.car')))).rejects.toMatchObject({
      code: 'ENOENT',
    });
  });
});
