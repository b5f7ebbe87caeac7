import { afterAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { canopySucceeds, loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// `canopy backup --limit-upload RATE` leaves room on the uplink: the backup sends no faster than
// RATE and is stored whole; a rate it cannot take is refused before anything is read or sent.
// `canopy restore --limit-download RATE` receives no faster than RATE, and restores whole.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-transfer-limits-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };

describe('a backup with an upload limit, and a restore with a download limit', () => {
  it('sends no faster than the limit, and restores identically; a rate it cannot take is refused', async () => {
    const home = path.join(scratch, 'home');
    await loginWithBucket(home, path.join(scratch, 'data'), 'Photos');
    const source = path.join(scratch, 'Pictures');
    const photo = randomBytes(3_000_000);
    writeSettled(path.join(source, 'beach.jpg'), photo);
    writeSettled(path.join(source, 'notes.txt'), 'sunny');

    const refused = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Photos', '--limit-upload', '10 apples', '--json'],
      env,
    );
    expect(refused.status).toBe(2);
    expect(JSON.parse(refused.stderr)).toMatchObject({ error: { code: 'usage' } });
    const none = JSON.parse(await canopySucceeds(home, 'versions', '--bucket', 'Photos', '--json'));
    expect(none).toEqual([]);

    const limited = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Photos', '--limit-upload', '1MB/s', '--json'],
      env,
    );
    expect(limited.status, limited.stderr).toBe(0);
    const result = JSON.parse(limited.stdout) as { bytesUploaded: number; durationMs: number };
    expect(result.bytesUploaded).toBeGreaterThanOrEqual(3_000_005);
    // 3 MB at 1 MB a second: the last of it cannot have gone before about 3 s. A bound below,
    // which a slow machine only exceeds further.
    expect(result.durationMs).toBeGreaterThanOrEqual(2500);
    // Not taken as the link's speed, which sizes the next unlimited backup's shards.
    const state = new Database(path.join(home, 'state.sqlite'), { readonly: true });
    try {
      expect(state.prepare('SELECT count(*) AS n FROM upload_speeds').get()).toEqual({ n: 0 });
    } finally {
      state.close();
    }

    // Restored at 1 MB a second the other way: whole, and again no sooner than the limit lets
    // its 3 MB come (a bound below, which a slow machine only exceeds further).
    const target = path.join(scratch, 'restored');
    const refusedRestore = await runCanopy(
      home,
      ['restore', '--bucket', 'Photos', '--to', target, '--limit-download', '0.5kB'],
      env,
    );
    expect(refusedRestore.status).toBe(2);
    expect(refusedRestore.stderr).toContain('canopy: --limit-download takes bytes a second');
    const started = performance.now();
    await canopySucceeds(
      home,
      ...['restore', '--bucket', 'Photos', '--to', target, '--limit-download', '8Mbit'],
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(2500);
    expect(readFileSync(path.join(target, 'beach.jpg')).equals(photo)).toBe(true);
    expect(readFileSync(path.join(target, 'notes.txt'), 'utf8')).toBe('sunny');
  });
});
