import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CID } from 'multiformats/cid';
import { cidFromSha256, RAW_CODEC, sha256Of } from '../../../main/protocol/index.ts';
import { holdsSameBytes, type VersionFile } from '../../../main/restore/already-there.ts';

// Whether a file a restore finds in its target holds the version's bytes, leaf by leaf: small
// files are read on the engine's thread in one piece, larger ones through the thread pool a
// mebibyte at a time; both must tell a file the same only when every leaf hashes to its CID
// and nothing follows, and never read anything but a regular file.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-already-there-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const KiB = 1024;
const MiB = 1024 * KiB;

/** A version's file of `pieces`, each one leaf. */
function versionFileOf(...pieces: Uint8Array[]): VersionFile {
  const sizes = new Map<string, number>();
  const leaves: CID[] = pieces.map((piece) => {
    const cid = cidFromSha256(RAW_CODEC, sha256Of(piece));
    sizes.set(cid.toString(), piece.length);
    return cid;
  });
  return {
    size: pieces.reduce((sum, piece) => sum + piece.length, 0),
    leaves: () => leaves,
    leafSize: (cid) => sizes.get(cid.toString()),
  };
}

function fileHolding(name: string, bytes: Uint8Array): string {
  const file = path.join(scratch, name);
  writeFileSync(file, bytes);
  return file;
}

/** `bytes` with the byte at `at` flipped. */
function flipped(bytes: Uint8Array, at: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[at] = (copy[at] ?? 0) ^ 0xff;
  return copy;
}

describe('a file found where a restore writes one', () => {
  it('is the same when every leaf matches, small or large, and in leaves of any size', async () => {
    const small = randomBytes(300);
    expect(await holdsSameBytes(fileHolding('small', small), versionFileOf(small))).toBe(true);
    // Past the size compared on this thread, and leaves that straddle the reads.
    const first = randomBytes(MiB + 7);
    const second = randomBytes(70 * KiB);
    const large = Buffer.concat([first, second]);
    expect(await holdsSameBytes(fileHolding('large', large), versionFileOf(first, second))).toBe(
      true,
    );
    // Small, in two leaves, as another tool's tree may cut it.
    const parts = [randomBytes(10), randomBytes(20)] as const;
    const joined = Buffer.concat(parts);
    expect(await holdsSameBytes(fileHolding('two', joined), versionFileOf(...parts))).toBe(true);
    expect(await holdsSameBytes(fileHolding('empty', new Uint8Array()), versionFileOf())).toBe(
      true,
    );
  });

  it('differs when any byte does, in any leaf, also at the same size', async () => {
    const small = randomBytes(300);
    const smallFile = fileHolding('small-other', flipped(small, 299));
    expect(await holdsSameBytes(smallFile, versionFileOf(small))).toBe(false);
    const first = randomBytes(MiB);
    const second = randomBytes(100 * KiB);
    const largeFile = fileHolding('large-other', flipped(Buffer.concat([first, second]), MiB + 5));
    expect(await holdsSameBytes(largeFile, versionFileOf(first, second))).toBe(false);
    const parts = [randomBytes(10), randomBytes(20)] as const;
    const twoFile = fileHolding('two-other', flipped(Buffer.concat(parts), 3));
    expect(await holdsSameBytes(twoFile, versionFileOf(...parts))).toBe(false);
    // Longer or shorter: the same leaves, and more or fewer bytes.
    const longer = fileHolding('longer', Buffer.concat([small, Buffer.from('!')]));
    expect(await holdsSameBytes(longer, versionFileOf(small))).toBe(false);
    expect(
      await holdsSameBytes(fileHolding('shorter', small.subarray(1)), versionFileOf(small)),
    ).toBe(false);
  });

  it('is never read when it is not a regular file, also when it became something else since it was looked at', async () => {
    const bytes = Buffer.from('the version holds these words');
    const wanted = versionFileOf(bytes);
    const target = fileHolding('target', bytes);
    const link = path.join(scratch, 'link');
    symlinkSync(target, link);
    expect(await holdsSameBytes(link, wanted)).toBe(false);
    const pipe = path.join(scratch, 'pipe');
    execFileSync('mkfifo', [pipe]);
    expect(await holdsSameBytes(pipe, wanted)).toBe(false);
    // Looked at as this file, then replaced by a link to one of the same bytes, and by a pipe:
    // neither is followed or waited on.
    const stale = fileHolding('stale', bytes);
    const asLookedAt = lstatSync(stale);
    unlinkSync(stale);
    symlinkSync(target, stale);
    expect(await holdsSameBytes(stale, wanted, asLookedAt)).toBe(false);
    unlinkSync(stale);
    execFileSync('mkfifo', [stale]);
    expect(await holdsSameBytes(stale, wanted, asLookedAt)).toBe(false);
    // Gone since.
    unlinkSync(stale);
    expect(await holdsSameBytes(stale, wanted, asLookedAt)).toBe(false);
  });
});
