import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  expectedUploadSpeedOf,
  openStateDatabase,
  recordShardLimit,
  recordUploadSpeed,
  SHARD_LIMIT_LIFETIME_MS,
  shardLimitOf,
  uploadSpeedOf,
  upsertBucket,
} from '../../../main/state/index.ts';
import {
  MAX_SHARD_TARGET_BYTES,
  MIN_SHARD_TARGET_BYTES,
  shardTargetFor,
} from '../../../main/uploader/index.ts';

const MiB = 1024 * 1024;
const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-shard-target-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('shardTargetFor', () => {
  it('aims at a minute of upload, between a few blocks and 64 MiB', () => {
    expect(shardTargetFor(500_000)).toBe(30_000_000);
    expect(shardTargetFor(200_000)).toBe(12_000_000);
    expect(shardTargetFor(10_000)).toBe(MIN_SHARD_TARGET_BYTES);
    expect(shardTargetFor(100 * MiB)).toBe(MAX_SHARD_TARGET_BYTES);
    expect(MIN_SHARD_TARGET_BYTES).toBe(4 * MiB);
    expect(MAX_SHARD_TARGET_BYTES).toBe(64 * MiB);
  });

  it('takes 64 MiB while no speed is known, or none that makes sense', () => {
    for (const speed of [undefined, 0, -5, Number.NaN, Number.POSITIVE_INFINITY])
      expect(shardTargetFor(speed)).toBe(64 * MiB);
  });
});

describe('upload speeds', () => {
  it('keeps each bucket its own speed, half the new sample and half what came before', () => {
    const db = openStateDatabase(path.join(scratch, 'speeds.sqlite'));
    try {
      expect(uploadSpeedOf(db, 'b1')).toBeUndefined();
      recordUploadSpeed(db, 'b1', { bytes: 4_000_000, ms: 2_000 }, 1);
      expect(uploadSpeedOf(db, 'b1')).toBe(2_000_000);
      recordUploadSpeed(db, 'b1', { bytes: 1_000_000, ms: 5_000 }, 2);
      expect(uploadSpeedOf(db, 'b1')).toBe(1_100_000);
      // Nothing timed is no sample.
      recordUploadSpeed(db, 'b1', { bytes: 0, ms: 0 }, 3);
      expect(uploadSpeedOf(db, 'b1')).toBe(1_100_000);
      expect(uploadSpeedOf(db, 'b2')).toBeUndefined();
    } finally {
      db.close();
    }
  });
});

describe('expected upload speeds', () => {
  it("takes a bucket's own, else the one measured last for a bucket of the account logged in", () => {
    const db = openStateDatabase(path.join(scratch, 'expected.sqlite'));
    const bucket = (id: string) =>
      upsertBucket(db, {
        id,
        name: id,
        type: 'backup',
        storage_class: 'hot',
        bucket_key_account: null,
        bucket_key_fingerprint: null,
        updated_at: 1,
      });
    try {
      bucket('home');
      bucket('photos');
      bucket('new');
      expect(expectedUploadSpeedOf(db, 'new')).toBeUndefined();
      recordUploadSpeed(db, 'home', { bytes: 1_000_000, ms: 1_000 }, 1);
      recordUploadSpeed(db, 'photos', { bytes: 300_000, ms: 1_000 }, 2);
      // A bucket of the account before, whose record went at logout, is not on this link.
      recordUploadSpeed(db, 'gone', { bytes: 9_000_000, ms: 1_000 }, 3);
      expect(expectedUploadSpeedOf(db, 'new')).toBe(300_000);
      expect(expectedUploadSpeedOf(db, 'home')).toBe(1_000_000);
    } finally {
      db.close();
    }
  });
});

describe('shard limits', () => {
  it("keeps a bucket's learned limit for 30 days, then lets full-size shards be tried again", () => {
    const db = openStateDatabase(path.join(scratch, 'limits.sqlite'));
    try {
      const learnedAt = 1_800_000_000_000;
      expect(shardLimitOf(db, 'b1', learnedAt)).toBeUndefined();
      recordShardLimit(db, 'b1', 3 * MiB, learnedAt);
      expect(shardLimitOf(db, 'b1', learnedAt + SHARD_LIMIT_LIFETIME_MS - 1)).toBe(3 * MiB);
      expect(shardLimitOf(db, 'b1', learnedAt + SHARD_LIMIT_LIFETIME_MS)).toBeUndefined();
      expect(SHARD_LIMIT_LIFETIME_MS).toBe(30 * 24 * 3600 * 1000);
      // Learned again, the new limit replaces the old one.
      recordShardLimit(db, 'b1', 5 * MiB, learnedAt + SHARD_LIMIT_LIFETIME_MS);
      expect(shardLimitOf(db, 'b1', learnedAt + SHARD_LIMIT_LIFETIME_MS)).toBe(5 * MiB);
      expect(shardLimitOf(db, 'b2', learnedAt)).toBeUndefined();
    } finally {
      db.close();
    }
  });
});
