import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  forgetBucket,
  openStateDatabase,
  readBucket,
  sourceFileIndex,
  upsertBucket,
  writeAccount,
  type StateDb,
} from '../../../main/state/index.ts';
import { anotherProcessHolding, exitOf } from '../../helpers/sqlite-holder.ts';

// Two Canopy processes on one home (two backups to two buckets, a backup and the app) write the
// same state database. A write that finds the other's under way waits for it, whatever it read
// first in its transaction, rather than failing at once as though the home were stuck.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-state-writers-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** How long the other process keeps its write open: well within the wait, well past none. */
const OTHER_WRITE_MS = 700;

/**
 * Another process that opens `file` and holds a write to it for OTHER_WRITE_MS; resolves once
 * it holds it. Its exit tells whether it committed.
 */
function anotherProcessWriting(file: string): Promise<ChildProcess> {
  return anotherProcessHolding(
    file,
    `db.exec('BEGIN IMMEDIATE');
     db.prepare("INSERT INTO blocks_to_resend (bucket_id, cid, found_at) VALUES ('other', 'bafy-other', 0)").run();`,
    `Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${OTHER_WRITE_MS});
     db.exec('COMMIT');`,
  );
}

function withState(name: string, use: (db: StateDb, file: string) => Promise<void>) {
  return async () => {
    const file = path.join(scratch, `${name}.sqlite`);
    const db = openStateDatabase(file);
    try {
      await use(db, file);
    } finally {
      db.close();
    }
  };
}

const bucket = {
  id: 'bucket-1',
  name: 'Photos',
  type: 'backup',
  storage_class: 'hot',
  bucket_key_account: 'bucket-key:1',
  bucket_key_fingerprint: 'f1',
  updated_at: 0,
};

describe('a state write while another process writes', () => {
  it(
    "commits a backup's file index once the other write is done",
    withState('file-index', async (db, file) => {
      const staged = sourceFileIndex(db, 'bucket-1', '/photos').stage();
      staged.add({
        path: 'beach.jpg',
        kind: 'file',
        size: 3,
        mtimeNs: 1_700_000_000_000_000_000n,
        ctimeNs: 1_700_000_000_000_000_000n,
        ino: 42n,
        mode: 0o644,
        target: null,
        cid: 'bafy-beach',
        nodeSize: null,
        leaves: Buffer.alloc(32, 1),
      });
      // Sealed once its version was pushed, as a backup does before it uploads the shards.
      const untrusted = { paths: [], filesModifiedFromNs: 2n ** 62n };
      staged.seal('version-1', untrusted);
      const other = await anotherProcessWriting(file);
      staged.commit('version-1', untrusted);
      expect(await exitOf(other)).toBe(0);
      const index = sourceFileIndex(db, 'bucket-1', '/photos');
      expect(index.versionId).toBe('version-1');
      expect(index.lookup('beach.jpg')?.cid).toBe('bafy-beach');
    }),
  );

  it(
    'forgets a deleted bucket once the other write is done',
    withState('forget-bucket', async (db, file) => {
      upsertBucket(db, bucket);
      const other = await anotherProcessWriting(file);
      expect(forgetBucket(db, 'bucket-1')?.name).toBe('Photos');
      expect(await exitOf(other)).toBe(0);
      expect(readBucket(db, 'bucket-1')).toBeUndefined();
    }),
  );

  it(
    'records a login once the other write is done',
    withState('account', async (db, file) => {
      const other = await anotherProcessWriting(file);
      writeAccount(db, {
        mode: 'local',
        server_url: null,
        local_data_dir: '/data',
        user_id: 'user-1',
        key_id: 'key-1',
        fingerprint: 'f1',
        email: null,
        device_name: 'laptop',
        device_key_account: 'device-key:1',
        enrolled_at: 0,
      });
      expect(await exitOf(other)).toBe(0);
      expect(db.prepare('SELECT user_id FROM account').pluck().get()).toBe('user-1');
    }),
  );
});
