import { afterAll, describe, expect, it } from 'vitest';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { exporter, recursive } from 'ipfs-unixfs-exporter';
import type { CID } from 'multiformats/cid';
import { packSource } from '../../../main/packer/index.ts';
import type { SkippedItem } from '../../../main/scanner/index.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function pack(dir: string) {
  const blocks = new Map<string, Uint8Array>();
  const skipped: SkippedItem[] = [];
  const tree = await packSource({
    sourceDir: dir,
    sourceLabel: 'test:/src',
    deviceFingerprint: 'a'.repeat(40),
    createdAtSeconds: 1_800_000_000,
    onLeaf: (cid: CID, bytes: Uint8Array) => {
      blocks.set(cid.toString(), bytes);
      return Promise.resolve();
    },
    onSkip: (item) => skipped.push(item),
  });
  for (const block of tree.metadataBlocks) blocks.set(block.cid.toString(), block.bytes);
  return { tree, blocks, skipped };
}

describe('packSource', () => {
  it('packs files, folders and symlinks into a tree a standard exporter reads back byte for byte', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-pack-'));
    dirs.push(dir);
    const big = randomBytes(1_048_576 + 1);
    mkdirSync(path.join(dir, 'docs', 'deep'), { recursive: true });
    writeFileSync(path.join(dir, 'empty.txt'), '');
    writeFileSync(path.join(dir, 'docs', 'deep', 'big.bin'), big);
    writeFileSync(path.join(dir, 'docs', 'café\nnewline.txt'), 'hello');
    symlinkSync('docs/deep/big.bin', path.join(dir, 'link'));
    chmodSync(path.join(dir, 'docs', 'café\nnewline.txt'), 0o751);
    utimesSync(
      path.join(dir, 'empty.txt'),
      new Date('2001-02-03T04:05:06Z'),
      new Date('2001-02-03T04:05:06Z'),
    );

    const { tree, blocks } = await pack(dir);
    expect(tree.fileCount).toBe(3);
    expect(tree.totalBytes).toBe(big.length + 5);
    // The empty file is a File node over one empty raw leaf, as the standard importer makes it.
    expect([...tree.leaves.values()].sort((a, b) => a - b)).toEqual([0, 1, 5, 1_048_576]);
    const store = {
      // eslint-disable-next-line @typescript-eslint/require-await -- the exporter's contract is async
      async *get(cid: CID) {
        const bytes = blocks.get(cid.toString());
        if (!bytes) throw new Error(`missing ${cid.toString()}`);
        yield bytes;
      },
    };
    const found = new Map<
      string,
      { type: string; content?: Buffer; mode?: number | undefined; mtime?: number; target?: string }
    >();
    for await (const ref of recursive(tree.rootCid, store)) {
      const entry = await exporter(ref.cid, store);
      const rel = ref.path.split('/').slice(1).join('/');
      if (entry.type === 'file' && entry.unixfs.type === 'symlink') {
        // This exporter reports a symlink as a file whose UnixFS data is the target.
        found.set(rel, { type: 'symlink', target: new TextDecoder().decode(entry.unixfs.data) });
      } else if (entry.type === 'file') {
        const chunks: Uint8Array[] = [];
        for await (const chunk of entry.content()) chunks.push(chunk);
        found.set(rel, {
          type: 'file',
          content: Buffer.concat(chunks),
          mode: entry.unixfs.mode,
          mtime: Number(entry.unixfs.mtime?.secs),
        });
      } else if (entry.type === 'directory') {
        found.set(rel, { type: 'directory' });
      } else {
        found.set(rel, { type: entry.type });
      }
    }
    expect(found.get('docs/deep/big.bin')?.content?.equals(big)).toBe(true);
    expect(found.get('docs/café\nnewline.txt')).toMatchObject({ mode: 0o751 });
    expect(found.get('empty.txt')).toMatchObject({
      content: Buffer.alloc(0),
      mtime: Date.parse('2001-02-03T04:05:06Z') / 1000,
    });
    expect(found.get('link')).toEqual({ type: 'symlink', target: 'docs/deep/big.bin' });
  });

  it('gives identical root and manifest CIDs for identical content', async () => {
    const a = mkdtempSync(path.join(os.tmpdir(), 'canopy-pack-'));
    const b = mkdtempSync(path.join(os.tmpdir(), 'canopy-pack-'));
    dirs.push(a, b);
    for (const dir of [a, b]) {
      writeFileSync(path.join(dir, 'same.txt'), 'same bytes');
      utimesSync(path.join(dir, 'same.txt'), 1_000_000_000, 1_000_000_000);
      utimesSync(dir, 1_000_000_000, 1_000_000_000);
    }
    const first = await pack(a);
    const second = await pack(b);
    expect(first.tree.rootCid.toString()).toBe(second.tree.rootCid.toString());
    expect(first.tree.manifestCid.toString()).toBe(second.tree.manifestCid.toString());
  });
});
