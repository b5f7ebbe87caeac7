import { afterAll, describe, expect, it } from 'vitest';
import {
  closeSync,
  mkdtempSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CID } from 'multiformats/cid';
import { identity } from 'multiformats/hashes/identity';
import { sha256 } from 'multiformats/hashes/sha2';
import { fileAsLeft, fileAsWritten } from '../../../main/restore/file-as-left.ts';
import { InodeNumbers } from '../../../main/scanner/index.ts';
import { leavesOfList } from '../../../main/packer/index.ts';

// A restored file as noted for the next backup: its stat as a backup's walk reads it once the
// file has its name (the rename moves its ctime), and its leaves as a leaf list; none for a
// file whose leaves a list cannot hold (another tool's tree), which the backup must then read,
// nor for one another write changed before it was noted.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-file-as-left-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const RAW = 0x55;

function writtenFile(name: string, bytes: Uint8Array): { fd: number; file: string } {
  const file = path.join(scratch, name);
  const fd = openSync(file, 'w+');
  writeSync(fd, bytes);
  return { fd, file };
}

/** Past the coarsest tick of the kernel's clock, so that a ctime set after is another. */
const aTickLater = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 20));

describe('fileAsWritten and fileAsLeft', () => {
  it('give the size, mtime, inode and ctime a walk reads once it is renamed, and the leaves as a list', async () => {
    const bytes = new TextEncoder().encode('restored words');
    const leaf = CID.createV1(RAW, await sha256.digest(bytes));
    const { fd, file } = writtenFile('temporary', bytes);
    const inodes = new InodeNumbers();
    let written;
    try {
      written = fileAsWritten(fd, scratch, [leaf], inodes);
    } finally {
      closeSync(fd);
    }
    const before = statSync(file, { bigint: true });
    await aTickLater();
    const named = path.join(scratch, 'restored.txt');
    renameSync(file, named);
    const after = statSync(named, { bigint: true });
    expect(after.ctimeNs).not.toBe(before.ctimeNs);
    const left = written && fileAsLeft(named, written, inodes);
    expect(left).toMatchObject({
      file: named,
      size: bytes.length,
      mtimeNs: after.mtimeNs,
      ctimeNs: after.ctimeNs,
      ino: after.ino,
    });
    expect(leavesOfList(left?.leaves ?? new Uint8Array(), bytes.length)).toEqual([
      { cid: leaf, size: bytes.length },
    ]);
  });

  it('give nothing for a file written again before it was noted', async () => {
    const bytes = new TextEncoder().encode('restored words');
    const leaf = CID.createV1(RAW, await sha256.digest(bytes));
    const { fd, file } = writtenFile('rewritten.txt', bytes);
    const inodes = new InodeNumbers();
    const written = fileAsWritten(fd, scratch, [leaf], inodes);
    closeSync(fd);
    expect(written).toBeDefined();
    if (!written) return;
    writeFileSync(file, 'another, longer text');
    expect(fileAsLeft(file, written, inodes)).toBeUndefined();
    rmSync(file);
    expect(fileAsLeft(file, written, inodes)).toBeUndefined();
  });

  it('give nothing for leaves a list cannot hold', async () => {
    const bytes = new TextEncoder().encode('inline');
    const { fd } = writtenFile('other-tool.txt', bytes);
    try {
      const inlined = CID.createV1(RAW, identity.digest(bytes));
      const node = CID.createV1(0x70, await sha256.digest(bytes));
      for (const leaves of [[inlined], [node]])
        expect(fileAsWritten(fd, scratch, leaves, new InodeNumbers())).toBeUndefined();
    } finally {
      closeSync(fd);
    }
  });
});
