import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// A version's list of files is pulled onto this computer's disk before it is read. No backup
// makes one larger than the spec's limit (§14, 128 MiB), so a pull stops there: a faulty or
// hostile service sending more, or sending without end, would otherwise fill the disk Canopy
// keeps its state on. The limit is lowered here, as the backup's is in source-too-large.test.ts.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-pull-limit-'));
const source = path.join(scratch, 'source');
/** This device's limit: less than the version's list of 300 files takes. */
const LIMIT_BYTES = 16 * 1024;
let service: TestService;
/** Between the service and this device. */
let proxy: FaultProxy;
let backingUp: Engine;
let browsing: Engine;
let browsingHome: string;

beforeAll(async () => {
  service = await startTestService();
  proxy = await startFaultProxy(service.url);
  mkdirSync(source);
  // One content, so one block: the test service takes 100 CIDs a request.
  for (let file = 0; file < 300; file++)
    writeFileSync(path.join(source, `a letter to the editor, number ${file}.txt`), 'Sir,\n');
  const backingUpHome = path.join(scratch, 'backing-up');
  backingUp = createEngine({ home: backingUpHome, secrets: new FileSecretStore(backingUpHome) });
  await backingUp.login({ server: service.url, code: service.addUser('ann@example.org').code });
  await backingUp.createBucket({ name: 'Letters', type: 'backup', storageClass: 'hot' });
  await backingUp.backup({ dir: source, bucket: 'Letters' });
  browsingHome = path.join(scratch, 'browsing');
  browsing = createEngine({
    home: browsingHome,
    secrets: new FileSecretStore(browsingHome),
    metadataLimitBytes: LIMIT_BYTES,
    retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
  });
  await browsing.login({ server: proxy.url, code: (await backingUp.newEnrollmentCode()).code });
});
afterAll(async () => {
  await backingUp?.close();
  await browsing?.close();
  await proxy.close();
  await service.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** What this device keeps of versions' lists of files, and what it is pulling. */
function keptAndStaged(): string[] {
  return ['metadata', 'staging'].flatMap((folder) => {
    try {
      return readdirSync(path.join(browsingHome, folder), { recursive: true }).map(String);
    } catch {
      return [];
    }
  });
}

/** Pulls of a version's list of files asked of the service since `before` requests. */
function pullsSince(before: number): number {
  return proxy.seen.slice(before).filter((seen) => seen.path.endsWith('/pull')).length;
}

describe("a version's list of files larger than any backup makes", () => {
  it('is refused by the length the service states, and nothing of it is kept', async () => {
    const before = proxy.seen.length;
    await expect(browsing.browse({ bucket: 'Letters' })).rejects.toMatchObject({
      code: 'payload_too_large',
      message: expect.stringMatching(
        /^the service sent more than 16384 bytes of metadata for version [0-9a-f-]+, more than any backup makes: the service is faulty, or the version was not made by Canopy; nothing of it was kept$/,
      ) as unknown,
    });
    // Asked once: what the service sends does not get smaller by asking again.
    expect(pullsSince(before)).toBe(1);
    expect(keptAndStaged().filter((name) => name.endsWith('.car'))).toEqual([]);
  });

  it('is cut off when the service sends it without a length and without end', async () => {
    proxy.schedule(['endless', 'endless'], /\/pull$/);
    const before = proxy.seen.length;
    await expect(
      browsing.restore({ bucket: 'Letters', to: path.join(scratch, 'restored'), overwrite: false }),
    ).rejects.toMatchObject({
      code: 'payload_too_large',
      message: expect.stringContaining('more than 16384 bytes of metadata') as unknown,
    });
    expect(pullsSince(before)).toBe(1);
    expect(keptAndStaged().filter((name) => name.endsWith('.car'))).toEqual([]);
  });
});
