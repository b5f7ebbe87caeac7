import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { BlockStore } from '../../../server/blocks/block-store.ts';
import { UnreadableBlocks } from '../../../server/blocks/unreadable-blocks.ts';
import type { BlockLocation } from '../../../server/store/stored-blocks.ts';

// Which blocks a blocks/car request is refused for, up front: those whose read failed on the
// disk (EIO, their pack gone or cut short) and that still fail, read again. A block whose pack
// is not there stands in for one on a bad sector, so whether a block is noted shows: a noted
// one is read and refused; one not noted is not read.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const diskFailure = Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' });

function newStore(): BlockStore {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'canopy-unreadable-'));
  dirs.push(dataDir);
  return new BlockStore(dataDir);
}

/** A block in a pack of its own, written and committed. */
async function storedBlock(store: BlockStore, cid: string): Promise<BlockLocation> {
  const pack = await store.startPack();
  const offset = pack.append(randomBytes(1000));
  await pack.finish();
  store.commitPack(pack);
  return { cid, size: 1000, pack: pack.id, offset };
}

/** Block `cid` in a pack that is not there: reading it throws. */
function lostBlock(cid: string): BlockLocation {
  return { cid, size: 1000, pack: '00000000-0000-4000-8000-000000000000', offset: 0 };
}

describe('UnreadableBlocks', () => {
  it('notes only blocks whose read failed for want of the block, not of the process', async () => {
    const store = newStore();
    const unreadable = new UnreadableBlocks();
    const tooManyFiles = Object.assign(new Error('EMFILE: too many open files'), {
      code: 'EMFILE',
    });
    unreadable.noteIfUnreadable(['a'], tooManyFiles);
    await expect(unreadable.stillUnreadable(store, [lostBlock('a')])).resolves.toEqual([]);
    unreadable.noteIfUnreadable(['a'], diskFailure);
    await expect(unreadable.stillUnreadable(store, [lostBlock('a')])).resolves.toEqual(['a']);
  });

  it('refuses a noted block whose pack is cut short before it', async () => {
    const store = newStore();
    const unreadable = new UnreadableBlocks();
    const stored = await storedBlock(store, 'c');
    unreadable.noteIfUnreadable(['c'], diskFailure);
    const pastTheEnd = { ...stored, size: stored.size + 1 };
    await expect(unreadable.stillUnreadable(store, [pastTheEnd])).resolves.toEqual(['c']);
  });

  it('serves a noted block that reads again, and forgets it', async () => {
    const store = newStore();
    const unreadable = new UnreadableBlocks();
    const readable = await storedBlock(store, 'b');
    unreadable.noteIfUnreadable(['b'], diskFailure);
    await expect(unreadable.stillUnreadable(store, [readable])).resolves.toEqual([]);
    // Forgotten: not read again.
    await expect(unreadable.stillUnreadable(store, [lostBlock('b')])).resolves.toEqual([]);
  });

  it('forgets the first noted once it notes 100 000 more', async () => {
    const store = newStore();
    const unreadable = new UnreadableBlocks();
    unreadable.noteIfUnreadable(['first', 'second'], diskFailure);
    unreadable.noteIfUnreadable(
      Array.from({ length: 99_999 }, (_, index) => `more-${index}`),
      diskFailure,
    );
    await expect(unreadable.stillUnreadable(store, [lostBlock('first')])).resolves.toEqual([]);
    await expect(unreadable.stillUnreadable(store, [lostBlock('second')])).resolves.toEqual([
      'second',
    ]);
  });
  it('names every noted block of a request that still fails, up to 1000', async () => {
    const store = newStore();
    const unreadable = new UnreadableBlocks();
    const readable = await storedBlock(store, 'whole');
    const bad = Array.from({ length: 1200 }, (_, index) => `bad-${index}`);
    unreadable.noteIfUnreadable([...bad, 'whole'], diskFailure);
    const asked = [lostBlock('not-noted'), readable, ...bad.map(lostBlock)];
    const named = await unreadable.stillUnreadable(store, asked);
    expect(named).toEqual(bad.slice(0, 1000));
  });
});
