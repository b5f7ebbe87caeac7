import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EngineError } from '../../../main/api/index.ts';
import { backupStoppedPartWay } from '../../../main/engine/backup-stopped-part-way.ts';
import { openStateDatabase, uploadQueue, type StateDb } from '../../../main/state/index.ts';
import { queuedUpload } from '../../helpers/queued-upload.ts';

// What a backup's failure says of the upload it leaves queued: how much of its data the host
// confirmed, of all it needs, for a failure of the link or the server; nothing for other
// failures, for a backup that had pushed nothing, or when the state cannot be read.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-stopped-backup-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const unreachable = new EngineError('network', 'cannot reach https://backup.example.org', {
  retryable: true,
});

/** A state database whose upload to `bucket-1` has 3 MB of 8 MB confirmed (and 5 MB held). */
function stateWithQueuedUpload(): StateDb {
  const db = openStateDatabase(path.join(mkdtempSync(path.join(scratch, 'db-')), 'state.sqlite'));
  const queue = uploadQueue(db);
  queue.record(
    queuedUpload({ files: 3, bytes_scanned: 13_000_000, new_bytes: 8_000_000 }),
    [
      { shardCid: 'shard-a', file: '', bytes: 3_000_000, needed: true },
      { shardCid: 'shard-b', file: '', bytes: 5_000_000, needed: true },
      { shardCid: 'shard-c', file: '', bytes: 5_000_000, needed: false },
    ],
    queue.startPlan('bucket-1'),
  );
  queue.confirm('v1', 'shard-a');
  return db;
}

describe('backupStoppedPartWay', () => {
  it('says how much of the data the host confirmed, keeping the code and whether to retry', () => {
    const db = stateWithQueuedUpload();
    const told = backupStoppedPartWay(unreachable, db, 'bucket-1');
    expect(told).toMatchObject({ code: 'network', retryable: true, cause: unreachable });
    expect((told as Error).message).toBe(
      'cannot reach https://backup.example.org; the backup stopped part way: 3.0 MB of its 8.0 MB of data were sent and stay with the server; running it again sends only the rest',
    );
    db.close();
  });

  it('tells a failure as it came with no upload queued for the bucket, or one a rerun meets again', () => {
    const db = stateWithQueuedUpload();
    expect(backupStoppedPartWay(unreachable, db, 'bucket-2')).toBe(unreachable);
    const quota = new EngineError('quota_exceeded', 'this push would exceed your storage quota');
    expect(backupStoppedPartWay(quota, db, 'bucket-1')).toBe(quota);
    db.close();
  });

  it('tells the failure as it came when the state cannot be read', () => {
    const db = stateWithQueuedUpload();
    db.close();
    expect(backupStoppedPartWay(unreachable, db, 'bucket-1')).toBe(unreachable);
  });
});
