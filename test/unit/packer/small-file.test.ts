import { lstatSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ChangedWhileRead, readSmallFile } from '../../../main/packer/small-file.ts';

// A small file is read in as few calls as possible, and a file that changed in between must
// still be caught: by its size, mtime or ctime after the read, even when its mtime was put back.

const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-small-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PAST = new Date('2020-01-02T03:04:05Z');

/** Writes `content`, dates it in the past, and returns what a scan would have seen. */
function scanned(
  name: string,
  content: string,
): { file: string; size: number; mtimeNs: bigint; ctimeNs: bigint } {
  const file = path.join(dir, name);
  writeFileSync(file, content);
  utimesSync(file, PAST, PAST);
  const stats = lstatSync(file, { bigint: true });
  return { file, size: Number(stats.size), mtimeNs: stats.mtimeNs, ctimeNs: stats.ctimeNs };
}

/** Rewrites the file with `content` after the scan, its mtime put back as the scan saw it. */
function rewriteKeepingMtime(file: string, content: string): void {
  writeFileSync(file, content);
  utimesSync(file, PAST, PAST);
}

async function changedBytes(read: Promise<Uint8Array>): Promise<string> {
  const error: unknown = await read.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ChangedWhileRead);
  return Buffer.from((error as ChangedWhileRead).bytes).toString();
}

describe('readSmallFile', () => {
  it('reads an unchanged file whole, and an empty one as no bytes', async () => {
    const text = scanned('same.txt', 'hello, world');
    expect(Buffer.from(await readSmallFile(text.file, text, () => undefined)).toString()).toBe(
      'hello, world',
    );
    const empty = scanned('empty.txt', '');
    expect((await readSmallFile(empty.file, empty, () => undefined)).length).toBe(0);
  });

  it('catches a file that grew before the read, though its mtime is back', async () => {
    const seen = scanned('grew-before.txt', 'abc');
    rewriteKeepingMtime(seen.file, 'abcdef');
    expect(await changedBytes(readSmallFile(seen.file, seen, () => undefined))).toBe('abcd');
  });

  it('catches a file that grew or shrank right after its bytes were read', async () => {
    const grew = scanned('grew-after.txt', 'abc');
    const afterGrowth = () => {
      rewriteKeepingMtime(grew.file, 'abcdef');
      return Promise.resolve();
    };
    expect(await changedBytes(readSmallFile(grew.file, grew, afterGrowth))).toBe('abc');

    const shrank = scanned('shrank-after.txt', 'abcdef');
    const afterShrinking = () => {
      rewriteKeepingMtime(shrank.file, 'ab');
      return Promise.resolve();
    };
    expect(await changedBytes(readSmallFile(shrank.file, shrank, afterShrinking))).toBe('abcdef');
  });

  it('catches a file rewritten at the same size right after its bytes were read, its mtime put back', async () => {
    const seen = scanned('same-size.txt', '1.0.0');
    // Past the coarsest tick of the kernel's clock, so that the rewrite's ctime is another.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const afterRewrite = () => {
      rewriteKeepingMtime(seen.file, '1.0.1');
      return Promise.resolve();
    };
    expect(await changedBytes(readSmallFile(seen.file, seen, afterRewrite))).toBe('1.0.0');
  });

  it('catches an empty file that gained bytes after the scan', async () => {
    const seen = scanned('was-empty.txt', '');
    const afterGrowth = () => {
      rewriteKeepingMtime(seen.file, 'new');
      return Promise.resolve();
    };
    expect(await changedBytes(readSmallFile(seen.file, seen, afterGrowth))).toBe('');
  });
});
