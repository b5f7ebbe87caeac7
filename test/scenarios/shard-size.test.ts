import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { openStateDatabase } from '../../main/state/index.ts';
import { startLocalService } from '../../cli/local-service.ts';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-shard-size-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Six 1 MiB files of fresh random bytes: 6 MiB the bucket does not hold. */
function writeNewContent(source: string): void {
  mkdirSync(source, { recursive: true });
  for (let i = 0; i < 6; i += 1)
    writeFileSync(path.join(source, `part-${i}.bin`), randomBytes(1 << 20));
}

describe('shard size', () => {
  it("sizes shards by the bucket's upload speed: a slow link gets shards of about a minute's upload", async () => {
    const home = path.join(scratch, 'home');
    const source = path.join(scratch, 'source');
    let shards = 0;
    const engine = createEngine({
      home,
      secrets: new FileSecretStore(home),
      startLocalService,
      afterShardConfirmed: (confirmedSoFar) => {
        if (confirmedSoFar > 0) shards += 1;
      },
    });
    // A second connection to the engine's state, as another process would see it.
    const state = openStateDatabase(path.join(home, 'state.sqlite'));
    const speed = (): number | undefined =>
      state
        .prepare<[], { bytes_per_second: number }>('SELECT bytes_per_second FROM upload_speeds')
        .get()?.bytes_per_second;
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Sized', type: 'backup', storageClass: 'hot' });

      // No speed known yet: 64 MiB shards, so the 6 MiB go in one; this machine's disk is fast.
      writeNewContent(source);
      await engine.backup({ dir: source, bucket: 'Sized' });
      expect(shards).toBe(1);
      expect(speed()).toBeGreaterThan(1_000_000);

      // The link has been slow (50 kB/s): a minute's worth is under the 4 MiB floor, so the
      // next 6 MiB go as two shards of three 1 MiB blocks.
      state.prepare('UPDATE upload_speeds SET bytes_per_second = 50000').run();
      shards = 0;
      writeNewContent(source);
      const result = await engine.backup({ dir: source, bucket: 'Sized' });
      expect(shards).toBe(2);
      expect(result.bytesUploaded).toBeGreaterThan(6 * (1 << 20));
      // What this upload achieved is averaged in.
      expect(speed()).toBeGreaterThan(50_000);
    } finally {
      state.close();
      await engine.close();
    }
  });
});
