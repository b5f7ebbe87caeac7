import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  openStateDatabase,
  uploadQueue,
  type QueuedBlock,
  type QueuedUpload,
  type StateDb,
} from '../../../main/state/index.ts';
import { queuedUpload } from '../../helpers/queued-upload.ts';

// A backup writes its planned shards' blocks into the state database as it plans them; the
// upload queue takes those of the shards the host needs, and nothing of a plan outlives it.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-shard-plan-'));
const databases: StateDb[] = [];
afterAll(() => {
  for (const db of databases) db.close();
  rmSync(scratch, { recursive: true, force: true });
});

function freshDatabase(): StateDb {
  const db = openStateDatabase(path.join(mkdtempSync(path.join(scratch, 'db-')), 'state.sqlite'));
  databases.push(db);
  return db;
}

function plannedRows(db: StateDb): number {
  return db.prepare<[], { rows: number }>('SELECT COUNT(*) AS rows FROM planned_blocks').get()
    ?.rows as number;
}

function upload(versionId: string, bucketId: string): QueuedUpload {
  return queuedUpload({
    version_id: versionId,
    bucket_id: bucketId,
    files: 3,
    bytes_scanned: 30,
    new_bytes: 30,
  });
}

const block = (name: string): QueuedBlock => ({
  cid: `cid-${name}`,
  path: name,
  offset: 0,
  length: 10,
});

describe('a shard plan', () => {
  it('gives the upload queue the blocks of the needed shards, in order, and goes', () => {
    const db = freshDatabase();
    const queue = uploadQueue(db);
    const plan = queue.startPlan('bucket-1');
    // Shard 0 holds a and b, shard 1 holds c; the host already holds c.
    plan.add(0, 0, block('a'));
    plan.add(0, 1, block('b'));
    plan.add(1, 0, block('c'));
    queue.record(
      upload('v1', 'bucket-1'),
      [
        { shardCid: 'shard-0', file: '', bytes: 20, needed: true },
        { shardCid: 'shard-1', file: '', bytes: 10, needed: false },
      ],
      plan,
    );
    expect(queue.blocksOf('v1', 'shard-0', 0, 10)).toEqual([block('a'), block('b')]);
    expect(queue.blocksOf('v1', 'shard-0', 1, 10)).toEqual([block('b')]);
    expect(queue.blocksOf('v1', 'shard-1', 0, 10)).toEqual([]);
    expect(queue.shardsOf('v1').map((shard) => [shard.shard_cid, shard.needed])).toEqual([
      ['shard-0', 1],
      ['shard-1', 0],
    ]);
    expect(plannedRows(db)).toBe(0);
  });

  it('left by a killed backup is dropped when the next backup to its bucket plans, not before', () => {
    const db = freshDatabase();
    const queue = uploadQueue(db);
    const left = queue.startPlan('bucket-1');
    left.add(0, 0, block('a'));
    left.flush();
    const otherBucket = queue.startPlan('bucket-2');
    otherBucket.add(0, 0, block('z'));
    otherBucket.flush();
    expect(plannedRows(db)).toBe(2);

    const next = queue.startPlan('bucket-1');
    expect(plannedRows(db)).toBe(1);
    next.add(0, 0, block('b'));
    queue.record(
      upload('v2', 'bucket-1'),
      [{ shardCid: 'shard-0', file: '', bytes: 10, needed: true }],
      next,
    );
    expect(queue.blocksOf('v2', 'shard-0', 0, 10)).toEqual([block('b')]);
    // The other bucket's backup may still be running: its plan is untouched.
    expect(plannedRows(db)).toBe(1);
    otherBucket.discard();
    expect(plannedRows(db)).toBe(0);
  });
});

describe('blocks dropped from a planned shard', () => {
  it('go, the blocks after them move up, and other shards and plans are untouched', () => {
    const db = freshDatabase();
    const queue = uploadQueue(db);
    const other = queue.startPlan('bucket-2');
    other.add(0, 0, block('x'));
    const plan = queue.startPlan('bucket-1');
    for (let position = 0; position < 5000; position++)
      plan.add(0, position, block(String(position)));
    plan.add(1, 0, block('1'));
    // Added and not yet written: dropped all the same.
    const dropped = new Set(['cid-0', 'cid-1', 'cid-2500', 'cid-4999']);
    expect(plan.dropBlocks(0, dropped)).toBe(4996);
    const kept = plan.blocksOf(0, 0, 10_000);
    expect(kept.map((kept) => kept.path)).toEqual(
      Array.from({ length: 5000 }, (_, position) => String(position)).filter(
        (name) => !dropped.has(`cid-${name}`),
      ),
    );
    // Positions run from 0 again, so paging goes through them all once.
    expect(plan.blocksOf(0, 2497, 2)).toEqual([block('2499'), block('2501')]);
    expect(plan.blocksOf(1, 0, 10)).toEqual([block('1')]);
    expect(plan.dropBlocks(1, new Set(['cid-1']))).toBe(0);
    expect(plan.blocksOf(1, 0, 10)).toEqual([]);
    expect(other.blocksOf(0, 0, 10)).toEqual([block('x')]);
  });
});

describe('an upload carried over to a new version', () => {
  it('lists every block of its needed shards across pages, and the new version sends only the shards asked for', () => {
    const db = freshDatabase();
    const queue = uploadQueue(db);
    const plan = queue.startPlan('bucket-1');
    // Two needed shards of more blocks together than one page of the listing, and one the host
    // held already.
    const sizes = [7000, 6000];
    sizes.forEach((count, shard) => {
      for (let position = 0; position < count; position++)
        plan.add(shard, position, block(`${shard}-${position}`));
    });
    plan.add(2, 0, block('held'));
    queue.record(
      upload('v1', 'bucket-1'),
      [
        { shardCid: 'shard-0', file: '', bytes: 70_000, needed: true },
        { shardCid: 'shard-1', file: '', bytes: 60_000, needed: true },
        { shardCid: 'shard-2', file: '', bytes: 10, needed: false },
      ],
      plan,
    );
    queue.confirm('v1', 'shard-0');
    const listed = [...queue.blocksOfUpload('v1')];
    expect(listed).toHaveLength(13_000);
    expect(new Set(listed.map((row) => row.cid)).size).toBe(13_000);
    expect(listed[6999]).toMatchObject({ shard_cid: 'shard-0', cid: 'cid-0-6999' });
    expect(listed[7000]).toMatchObject({ shard_cid: 'shard-1', cid: 'cid-1-0' });

    queue.carryOver('v1', upload('v2', 'bucket-1'), new Set(['shard-1']), 5);
    expect(queue.pendingFor('bucket-1')?.version_id).toBe('v2');
    expect(queue.supersededIn('bucket-1')).toEqual(['v1']);
    expect(
      queue.shardsOf('v2').map((shard) => [shard.shard_cid, shard.needed, shard.confirmed]),
    ).toEqual([
      ['shard-0', 0, 0],
      ['shard-1', 1, 0],
      ['shard-2', 0, 0],
    ]);
    expect(queue.blocksOf('v2', 'shard-1', 5999, 10)).toEqual([block('1-5999')]);
    expect(queue.blocksOf('v2', 'shard-0', 0, 10)).toEqual([]);
    expect(queue.shardsOf('v1')).toEqual([]);
    queue.forgetSuperseded('v1');
    expect(queue.supersededIn('bucket-1')).toEqual([]);
  });
});
