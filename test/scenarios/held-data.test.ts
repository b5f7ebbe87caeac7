import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import type { FaultProxy } from '../helpers/fault-proxy.ts';
import type { TestService } from '../helpers/test-service.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { expectRestoredWhole } from '../helpers/restored-whole.ts';
import { startProxiedService } from '../helpers/proxied-service.ts';

// A backup sends only what the user's server lacks (§17.4): a file back in the folder after a
// version without it is not sent again, even beside new data, while an older version still
// holds its bytes (§11.3: the held blocks join the new version's block set). The shard laid out
// with it is made again without it, once the host has said it holds it.
//
// Another device of the same user may delete that older version while the backup uploads: the
// bytes the backup left unsent must stay on the host (§11.6, §16: collection and block-set
// inserts share one lock). And a file may change between its read and the shard made again
// from it: the backup then packs again, leaving no version of the first pass behind.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-held-data-'));
const MiB = 1 << 20;
let service: TestService;
let proxy: FaultProxy;

/** Its requests failing are tried twice, quickly, and then fail. */
function engineAt(home: string): Engine {
  const folder = path.join(scratch, home);
  return createEngine({
    home: folder,
    secrets: new FileSecretStore(folder),
    retry: { attempts: 2, baseDelayMs: 10, maxDelayMs: 20 },
    outageBudgetMs: 200,
  });
}

/** Resolves once the proxy has seen a request `matches` picks, after its first `from` requests. */
async function arrived(from: number, matches: (method: string, url: string) => boolean) {
  while (!proxy.seen.slice(from).some((request) => matches(request.method, request.path)))
    await sleep(10);
}

function isShard(method: string, url: string): boolean {
  return method === 'PUT' && /\/upload\/[^/]+\/[^/]+$/.test(url);
}

function isMissingAsked(method: string, url: string): boolean {
  return method === 'POST' && url.endsWith('/blocks/missing');
}

/** The first request `matches` picks, from now on, is held back for `delayMs`. */
function holdFirst(matches: (method: string, url: string) => boolean, delayMs: number): void {
  let held = false;
  proxy.faultEach((method, url) => {
    if (held || !matches(method, url)) return 'pass';
    held = true;
    return { delayMs };
  });
}

/**
 * This device and another of a new user, with bucket "Shared" holding two versions of a folder:
 * the first with a photo and a note, the second without the photo. Then the photo is back in
 * the folder, and the note changed. This device reaches the service at `server`; the proxy's
 * address sends its every request through the proxy, not only those to the storage host.
 */
async function photoPutBack(name: string, server = service.url) {
  const thisDevice = engineAt(`${name}-home`);
  const other = engineAt(`${name}-other-home`);
  const { code } = service.addUser(`${name}@example.org`);
  await thisDevice.login({ server, code });
  await thisDevice.createBucket({ name: 'Shared', type: 'backup', storageClass: 'hot' });
  await other.login({ server: service.url, code: (await thisDevice.newEnrollmentCode()).code });
  const source = path.join(scratch, `${name}-source`);
  const photo = randomBytes(3 * MiB + 11);
  writeSettled(path.join(source, 'photo.bin'), photo);
  writeSettled(path.join(source, 'notes.txt'), 'first');
  const first = (await thisDevice.backup({ dir: source, bucket: 'Shared' })).versionId;
  rmSync(path.join(source, 'photo.bin'));
  const second = (await thisDevice.backup({ dir: source, bucket: 'Shared' })).versionId;
  writeSettled(path.join(source, 'photo.bin'), photo);
  writeSettled(path.join(source, 'notes.txt'), 'second');
  return { thisDevice, other, source, first, second, photo };
}

/**
 * Runs `test` on photoPutBack's devices and folder; then closes both devices, and lets every
 * request through the proxy again.
 */
async function withPhotoPutBack(
  name: string,
  server: string,
  test: (setup: Awaited<ReturnType<typeof photoPutBack>>) => Promise<void>,
): Promise<void> {
  const setup = await photoPutBack(name, server);
  try {
    await test(setup);
  } finally {
    proxy.faultEach(undefined);
    await setup.thisDevice.close();
    await setup.other.close();
  }
}

beforeAll(async () => {
  // Storage requests go through the proxy, which holds one back while a test acts meanwhile.
  ({ service, proxy } = await startProxiedService());
});
afterAll(async () => {
  await proxy.close();
  await service.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('data the server holds already, back in the folder', () => {
  it('is not sent again beside new data, and stays when another device deletes the version that held it meanwhile', async () => {
    await withPhotoPutBack(
      'deleted',
      service.url,
      async ({ thisDevice, other, source, first, second, photo }) => {
        // The first shard waits at the proxy while the other device deletes the first version.
        holdFirst(isShard, 1500);
        const seenBefore = proxy.seen.length;
        const phases: string[] = [];
        let trimmed = { filesTotal: 0, bytesTotal: 0 };
        const backup = thisDevice.backup({
          dir: source,
          bucket: 'Shared',
          onProgress: ({ phase, filesTotal, bytesTotal }) => {
            if (phases.at(-1) !== phase) phases.push(phase);
            if (phase === 'trimming') trimmed = { filesTotal, bytesTotal };
          },
        });
        await arrived(seenBefore, isShard);
        const deleted = await other.deleteVersion({ bucket: 'Shared', version: first });
        expect(deleted.versionId).toBe(first);
        const third = await backup;

        // Only the note was sent: the photo's bytes were held by the first version.
        expect(third.newBytes).toBe(photo.length + 'second'.length);
        expect(third.heldBytes).toBe(photo.length);
        expect(third.bytesUploaded).toBeLessThan(MiB);
        expect(phases).toEqual(['scanning', 'reading', 'pushing', 'trimming', 'uploading']);
        // Making the shard again read only the note from the folder, and the progress says so.
        expect(trimmed).toEqual({ filesTotal: 1, bytesTotal: 'second'.length });
        const versions = await thisDevice.listVersions({ bucket: 'Shared' });
        expect(versions.map((version) => [version.id, version.state])).toEqual([
          [third.versionId, 'active'],
          [second, 'outdated'],
        ]);
        await expectRestoredWhole(
          thisDevice,
          'Shared',
          source,
          path.join(scratch, 'deleted-restored'),
        );
      },
    );
  });

  it('leaves out held data of little weight beside new data when the upload is slow, and sends it when the speed is not known', async () => {
    const device = engineAt('slow-home');
    const { code } = service.addUser('slow@example.org');
    await device.login({ server: service.url, code });
    try {
      for (const bucket of ['Laptop', 'Slow', 'Unknown'])
        await device.createBucket({ name: bucket, type: 'backup', storageClass: 'hot' });
      const laptop = path.join(scratch, 'slow-laptop');
      const song = randomBytes(150_000);
      writeSettled(path.join(laptop, 'song.mp3'), song);
      await device.backup({ dir: laptop, bucket: 'Laptop' });
      // Beside 1 MiB of new data, the song the server holds is an eighth of the shard. Sent at
      // 1 MB/s, it would take 0.15 s, where reading the shard again takes about 0.01 s.
      const copies = ['slow', 'unknown'].map((name) => {
        const folder = path.join(scratch, `slow-${name}`);
        writeSettled(path.join(folder, 'song.mp3'), song);
        writeSettled(path.join(folder, 'mix.wav'), randomBytes(MiB));
        return folder;
      });
      const limited = await device.backup({
        dir: copies[0] ?? '',
        bucket: 'Slow',
        uploadBytesPerSecond: 1_000_000,
      });
      expect(limited.heldBytes).toBe(song.length);
      expect(limited.bytesUploaded).toBeLessThan(MiB + 1000);
      // Without a limit, and with no upload of the account's timed yet (the song's was too
      // small to time, and the limited one's speed is the limit's), no speed is known: the
      // song goes with its shard.
      const unknown = await device.backup({ dir: copies[1] ?? '', bucket: 'Unknown' });
      expect(unknown.heldBytes).toBe(song.length);
      expect(unknown.bytesUploaded).toBeGreaterThan(MiB + song.length);
      await expectRestoredWhole(device, 'Slow', copies[0] ?? '', path.join(scratch, 'slow-back'));
    } finally {
      await device.close();
    }
  });

  it('packs again when a file changed before its shard was made again, and leaves no version of the first pass', async () => {
    await withPhotoPutBack(
      'changed',
      service.url,
      async ({ thisDevice, source, first, second }) => {
        // While the host is asked what it holds, the note changes: the shard made again without
        // the photo reads the note once more, and finds it changed.
        holdFirst(isMissingAsked, 2000);
        const seenBefore = proxy.seen.length;
        const backup = thisDevice.backup({ dir: source, bucket: 'Shared' });
        await arrived(seenBefore, isMissingAsked);
        writeSettled(path.join(source, 'notes.txt'), 'third, and longer');
        const third = await backup;

        expect(third.bytesUploaded).toBeLessThan(MiB);
        const versions = await thisDevice.listVersions({ bucket: 'Shared' });
        expect(versions.map((version) => [version.id, version.state])).toEqual([
          [third.versionId, 'active'],
          [second, 'outdated'],
          [first, 'outdated'],
        ]);
        await expectRestoredWhole(
          thisDevice,
          'Shared',
          source,
          path.join(scratch, 'changed-restored'),
        );
      },
    );
  });

  it("deletes the first pass's version with the next backup, when deleting it failed as the backup packed again", async () => {
    await withPhotoPutBack('undeleted', proxy.url, async ({ thisDevice, source, second }) => {
      // As in the test before, the note changes while the host is asked what it holds; and
      // deleting the version of the first pass fails, each time it is tried.
      let asked = false;
      proxy.faultEach((method, url) => {
        if (method === 'DELETE' && url.includes('/buckets/metadata/')) return 'reset';
        if (asked || !isMissingAsked(method, url)) return 'pass';
        asked = true;
        return { delayMs: 2000 };
      });
      const seenBefore = proxy.seen.length;
      const backup = thisDevice.backup({ dir: source, bucket: 'Shared' });
      await arrived(seenBefore, isMissingAsked);
      writeSettled(path.join(source, 'notes.txt'), 'third, and longer');
      const third = await backup;
      const left = await thisDevice.listVersions({ bucket: 'Shared' });
      const pending = left.filter((version) => version.state === 'pending');
      expect(pending).toHaveLength(1);
      expect(left.find((version) => version.state === 'active')?.id).toBe(third.versionId);

      // Once the service takes deletions again, the next backup deletes it, and makes no
      // version: nothing changed.
      proxy.faultEach(undefined);
      const fourth = await thisDevice.backup({ dir: source, bucket: 'Shared' });
      expect(fourth).toMatchObject({ unchanged: true, versionId: third.versionId });
      const versions = await thisDevice.listVersions({ bucket: 'Shared' });
      expect(versions.map((version) => version.id)).not.toContain(pending[0]?.id);
      expect(versions.map((version) => version.state)).not.toContain('pending');
      expect(versions.map((version) => version.id)).toContain(second);
      await expectRestoredWhole(
        thisDevice,
        'Shared',
        source,
        path.join(scratch, 'undeleted-restored'),
      );
    });
  });
});
