import type { QueuedUpload } from '../../main/state/index.ts';

// A queued upload's record for tests of the upload queue and what reads it: version v1 of
// bucket-1, its shards planned from a source, with `fields` changed.

export function queuedUpload(fields: Partial<QueuedUpload> = {}): QueuedUpload {
  return {
    version_id: 'v1',
    bucket_id: 'bucket-1',
    storage_host: 'http://127.0.0.1:1',
    storage_authorization: 'token',
    staging_dir: '',
    source_dir: '/src',
    files: 0,
    bytes_scanned: 0,
    new_bytes: 0,
    created_at: 0,
    metadata_file: null,
    pushed_as: null,
    ...fields,
  };
}
