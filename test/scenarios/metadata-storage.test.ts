import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// Every version sends its whole metadata CAR, the list of all its files: 16 MB for 100 000.
// The service keeps CARs as content-defined chunks, each once (§10); a version that changed
// one file must cost it little more than the chunks holding that file's node and the nodes of
// the folders above it, the first version after the first backup too, which copies the
// folders it does not walk from the first one's tree.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-metadata-storage-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Bytes of the service's files of metadata chunks. */
function chunkBytes(dataDir: string): number {
  const dir = path.join(dataDir, 'metadata', 'chunks');
  return readdirSync(dir).reduce((sum, name) => sum + statSync(path.join(dir, name)).size, 0);
}

describe('the metadata of a version that changed one file', () => {
  it('costs the service a small part of its CAR, from the first version after the first backup on', async () => {
    const source = path.join(scratch, 'source');
    // 20 000 files, 100 to a folder: a CAR of about 3 MB.
    for (let i = 0; i < 20_000; i += 1)
      writeSettled(path.join(source, `album-${i % 200}`, `photo-${i}.txt`), `photo ${i}\n`);
    const home = path.join(scratch, 'home');
    const dataDir = path.join(scratch, 'data');
    const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    try {
      await engine.loginLocal({ dataDir });
      await engine.createBucket({ name: 'Photos', type: 'backup', storageClass: 'hot' });
      await engine.backup({ dir: source, bucket: 'Photos' });
      const carBytes = chunkBytes(dataDir);
      expect(carBytes).toBeGreaterThan(2_000_000);

      for (const changed of ['album-7/photo-1207.txt', 'album-150/photo-9950.txt']) {
        writeSettled(path.join(source, changed), 'retouched\n');
        const before = chunkBytes(dataDir);
        const result = await engine.backup({ dir: source, bucket: 'Photos' });
        expect(result).toMatchObject({ files: 20_000, filesUnchanged: 19_999 });
        // The whole CAR was sent: the service kept a tenth of it at most.
        expect(result.metadataBytesUploaded).toBeGreaterThan(carBytes * 0.9);
        expect(chunkBytes(dataDir) - before).toBeLessThan(carBytes / 10);
      }
    } finally {
      await engine.close();
    }
  });
});
