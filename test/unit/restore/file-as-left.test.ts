import { afterAll, describe, expect, it } from 'vitest';
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CID } from 'multiformats/cid';
import { identity } from 'multiformats/hashes/identity';
import { sha256 } from 'multiformats/hashes/sha2';
import { fileAsLeft } from '../../../main/restore/file-as-left.ts';
import { InodeNumbers } from '../../../main/scanner/index.ts';
import { leavesOfList } from '../../../main/packer/index.ts';

// A restored file as noted for the next backup: its stat as a backup's walk reads it, and its
// leaves as a leaf list; none for a file whose leaves a list cannot hold (another tool's tree),
// which the backup must then read.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-as-left-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const RAW = 0x55;

function writtenFile(name: string, bytes: Uint8Array): { fd: number; file: string } {
  const file = path.join(scratch, name);
  const fd = openSync(file, 'w+');
  writeSync(fd, bytes);
  return { fd, file };
}

describe('fileAsLeft', () => {
  it('gives the size, mtime and inode a walk reads, and the leaves as a list', async () => {
    const bytes = new TextEncoder().encode('restored words');
    const leaf = CID.createV1(RAW, await sha256.digest(bytes));
    const { fd, file } = writtenFile('restored.txt', bytes);
    try {
      const left = fileAsLeft(fd, scratch, [leaf], new InodeNumbers());
      const stat = statSync(file, { bigint: true });
      expect(left).toMatchObject({ size: bytes.length, mtimeNs: stat.mtimeNs, ino: stat.ino });
      expect(leavesOfList(left?.leaves ?? new Uint8Array(), bytes.length)).toEqual([
        { cid: leaf, size: bytes.length },
      ]);
    } finally {
      closeSync(fd);
    }
  });

  it('gives nothing for leaves a list cannot hold', async () => {
    const bytes = new TextEncoder().encode('inline');
    const { fd } = writtenFile('other-tool.txt', bytes);
    try {
      const inlined = CID.createV1(RAW, identity.digest(bytes));
      const node = CID.createV1(0x70, await sha256.digest(bytes));
      for (const leaves of [[inlined], [node]])
        expect(fileAsLeft(fd, scratch, leaves, new InodeNumbers())).toBeUndefined();
    } finally {
      closeSync(fd);
    }
  });
});
