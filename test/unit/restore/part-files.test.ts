import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CID } from 'multiformats/cid';
import { identity } from 'multiformats/hashes/identity';
import { sha256 } from 'multiformats/hashes/sha2';
import { afterAll, describe, expect, it } from 'vitest';
import { keptLeaves } from '../../../main/restore/part-files.ts';
import { RAW_CODEC } from '../../../main/protocol/index.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-part-files-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const MIB = 1024 * 1024;
/** A file of three leaves: two of 1 MiB and a last one of 1000 bytes. */
const leafBytes = [randomBytes(MIB), randomBytes(MIB), randomBytes(1000)];
const leaves = await Promise.all(
  leafBytes.map(async (bytes) => ({
    cid: CID.createV1(RAW_CODEC, await sha256.digest(bytes)),
    size: bytes.length,
  })),
);

/** A part file of `bytes`, written under `name`. */
function partFile(name: string, bytes: Uint8Array): string {
  const file = path.join(scratch, name);
  writeFileSync(file, bytes);
  return file;
}

describe('keptLeaves', () => {
  it('counts the leaves a part file holds whole from its start, and no more', async () => {
    const whole = Buffer.concat(leafBytes);
    expect(await keptLeaves(partFile('whole', whole), leaves)).toEqual({
      leaves: 3,
      bytes: 2 * MIB + 1000,
    });
    // Cut short in its second leaf, as a kill leaves it.
    expect(await keptLeaves(partFile('cut', whole.subarray(0, MIB + 4096)), leaves)).toEqual({
      leaves: 1,
      bytes: MIB,
    });
    // Its first leaf changed since: nothing after it counts either.
    const changed = Buffer.from(whole);
    changed[10] = (changed[10] ?? 0) ^ 1;
    expect(await keptLeaves(partFile('changed', changed), leaves)).toEqual({ leaves: 0, bytes: 0 });
  });

  it('stops at a leaf whose CID it cannot check, or whose size is not known', async () => {
    const whole = partFile('unchecked', Buffer.concat(leafBytes));
    const [first, second] = leaves;
    if (!first || !second) throw new Error('no leaves');
    const otherHash = {
      cid: CID.createV1(RAW_CODEC, identity.digest(leafBytes[1] ?? new Uint8Array())),
      size: MIB,
    };
    expect(await keptLeaves(whole, [first, otherHash, second])).toEqual({ leaves: 1, bytes: MIB });
    expect(await keptLeaves(whole, [first, { cid: second.cid, size: undefined }])).toEqual({
      leaves: 1,
      bytes: MIB,
    });
  });

  it("refuses a link put in the part file's place", async () => {
    const link = path.join(scratch, 'link');
    symlinkSync(partFile('target', Buffer.concat(leafBytes)), link);
    await expect(keptLeaves(link, leaves)).rejects.toMatchObject({ code: 'ELOOP' });
  });
});
