import { describe, expect, it } from 'vitest';
import { versionMadeBy } from '../../../main/engine/version-as-of.ts';
import type { Metadata } from '../../../main/protocol/index.ts';

// The version a bucket held at a time: the newest made then or before and stored whole.

function made(id: string, createdAt: number, state: Metadata['state'] = 'outdated'): Metadata {
  return {
    id,
    root_cid: 'bafy',
    metadata_cid: 'bafy',
    data_size: 0,
    state,
    created_at: createdAt,
    updated_at: createdAt,
    snapshot_id: null,
    bucket_id: 'bucket',
    previous_id: null,
  };
}

describe('the version made by a time', () => {
  // Newest first, as the service lists them.
  const versions = [
    made('uploading', 400, 'pending'),
    made('latest', 300, 'active'),
    made('failed', 250, 'upload_failed'),
    made('second, same second', 200),
    made('second', 200),
    made('first', 100),
  ];

  it('is the newest made at that second or before', () => {
    expect(versionMadeBy(versions, 300_000)?.id).toBe('latest');
    expect(versionMadeBy(versions, 299_999)?.id).toBe('second, same second');
    expect(versionMadeBy(versions, 100_000)?.id).toBe('first');
  });

  it('is never one still uploading or whose upload failed', () => {
    expect(versionMadeBy(versions, 500_000)?.id).toBe('latest');
    expect(versionMadeBy(versions, 260_000)?.id).toBe('second, same second');
  });

  it('is none before the first', () => {
    expect(versionMadeBy(versions, 99_999)).toBeUndefined();
  });
});
