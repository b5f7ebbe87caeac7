import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Engine } from '../../main/index.ts';
import {
  engineCountingBlockRequests,
  type BlockRequestCount,
} from '../helpers/counted-block-requests.ts';
import { firstBackup } from '../helpers/first-backup.ts';

// `verify` of a version of many small files: a device may make 200 requests at once and 50 a
// second after (§5.2), so blocks are asked for a thousand at a time, not a few dozen. In
// batches of 64, a verify of 100 000 small files waited 27 of its 29 s for the limit.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-verify-many-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const FILES = 2500;
let engine: Engine;
/** The blocks/car requests the storage host received since the last reset. */
let blockRequests: BlockRequestCount;

beforeAll(async () => {
  for (let i = 0; i < FILES; i += 1) {
    const folder = path.join(source, `folder-${i % 50}`);
    if (i < 50) mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, `note-${i}.txt`), `note number ${i}\n`);
  }
  ({ engine, count: blockRequests } = engineCountingBlockRequests(home));
  await firstBackup(engine, source, 'Notes');
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('verify of many small files', () => {
  it('checks every block of the version in a few requests', async () => {
    blockRequests.blocksCar = 0;
    const verified = await engine.verify({ bucket: 'Notes', all: true });
    expect(verified).toMatchObject({ checked: FILES, total: FILES });
    expect(verified.bytes).toBe(
      Array.from({ length: FILES }, (_, i) => `note number ${i}\n`.length).reduce((a, b) => a + b),
    );
    expect(blockRequests.blocksCar).toBe(Math.ceil(FILES / 1024));
  });

  it('checks a sample of distinct blocks in one request', async () => {
    blockRequests.blocksCar = 0;
    const sampled = await engine.verify({ bucket: 'Notes', all: false });
    expect(sampled).toMatchObject({ checked: 64, total: FILES });
    // 64 distinct notes came back, each of 14 to 17 bytes.
    expect(sampled.bytes).toBeGreaterThanOrEqual(64 * 14);
    expect(sampled.bytes).toBeLessThanOrEqual(64 * 17);
    expect(blockRequests.blocksCar).toBe(1);
  });
});
