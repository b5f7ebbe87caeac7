import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// Another device of the same user stores a version of the same folder while this one is still
// packing (§10.1: a stale previous_id gets 409). The backup does not fail: it builds again on
// the version the other device made, sends only what that version lacks, and leaves no version
// pending; the restore is the folder byte for byte.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-stale-previous-'));
const source = path.join(scratch, 'source');
const MiB = 1 << 20;
let service: TestService;
/** The user's other device, logged in by each test. */
let other: Engine | undefined;

/** The other device backs up the folder, and says which version it stored. */
async function otherBacksUp(): Promise<string> {
  if (!other) throw new Error('the other device is not logged in');
  return (await other.backup({ dir: source, bucket: 'Shared' })).versionId;
}

function engineAt(home: string, afterFileRead?: (relativePath: string) => Promise<void>): Engine {
  return createEngine({
    home,
    secrets: new FileSecretStore(home),
    ...(afterFileRead ? { afterFileRead } : {}),
  });
}

beforeAll(async () => {
  service = await startTestService({ limits: DEFAULT_LIMITS });
  writeSettled(path.join(source, 'a.bin'), randomBytes(2 * MiB + 3));
  writeSettled(path.join(source, 'b.bin'), randomBytes(3 * MiB + 5));
  writeSettled(path.join(source, 'c.txt'), 'as this device has it');
});
afterAll(async () => {
  await other?.close();
  await service.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a version stored by another device meanwhile', () => {
  it('is built on: the backup pushes again on it, sends only what it lacks, and restores byte for byte', async () => {
    let otherVersion: string | undefined;
    const thisDevice = engineAt(path.join(scratch, 'home'), async (relativePath) => {
      if (otherVersion !== undefined || relativePath !== 'a.bin') return;
      // Right after this device read a.bin: the other device backs up the folder with another
      // c.txt, then the file is as this device will read it.
      writeSettled(path.join(source, 'c.txt'), 'as the other device saw it');
      otherVersion = await otherBacksUp();
      writeSettled(path.join(source, 'c.txt'), 'as this device has it');
    });
    try {
      const { code } = service.addUser('ann@example.org');
      await thisDevice.login({ server: service.url, code });
      await thisDevice.createBucket({ name: 'Shared', type: 'backup', storageClass: 'hot' });
      other = engineAt(path.join(scratch, 'other-home'));
      await other.login({ server: service.url, code: (await thisDevice.newEnrollmentCode()).code });

      const result = await thisDevice.backup({ dir: source, bucket: 'Shared' });
      if (otherVersion === undefined) throw new Error('the other device stored no version');
      expect(result.versionId).not.toBe(otherVersion);
      // The other device sent a.bin and b.bin; this one sends its own c.txt and nothing more.
      expect(result.bytesUploaded).toBeGreaterThan(0);
      expect(result.bytesUploaded).toBeLessThan(MiB);
      const versions = await thisDevice.listVersions({ bucket: 'Shared' });
      expect(versions.map((version) => [version.id, version.state]).sort()).toEqual(
        [
          [result.versionId, 'active'],
          [otherVersion, 'outdated'],
        ].sort(),
      );

      const target = path.join(scratch, 'restored');
      mkdirSync(target);
      await thisDevice.restore({ bucket: 'Shared', to: target, overwrite: false });
      expect(readdirSync(target).sort()).toEqual(['a.bin', 'b.bin', 'c.txt']);
      for (const name of readdirSync(source))
        expect(
          readFileSync(path.join(target, name)).equals(readFileSync(path.join(source, name))),
        ).toBe(true);
      // The other device's version is still whole, with its own c.txt.
      const theirs = path.join(scratch, 'theirs');
      await thisDevice.restore({
        bucket: 'Shared',
        version: otherVersion,
        path: 'c.txt',
        to: theirs,
        overwrite: false,
      });
      expect(readFileSync(path.join(theirs, 'c.txt'), 'utf8')).toBe('as the other device saw it');
    } finally {
      await thisDevice.close();
    }
  });

  it('twice over is told clearly, leaves nothing pending, and the next run completes', async () => {
    const stored: string[] = [];
    const thisDevice = engineAt(path.join(scratch, 'home-twice'), async (relativePath) => {
      if (relativePath !== 'a.bin' || stored.length >= 2) return;
      // Each time this device has read a.bin, the other device stores a version of its own.
      writeSettled(path.join(source, 'c.txt'), `the other device's version ${stored.length + 1}`);
      stored.push(await otherBacksUp());
      writeSettled(path.join(source, 'c.txt'), 'as this device has it');
    });
    try {
      const { code } = service.addUser('bo@example.org');
      await thisDevice.login({ server: service.url, code });
      await thisDevice.createBucket({ name: 'Shared', type: 'backup', storageClass: 'hot' });
      await other?.close();
      other = engineAt(path.join(scratch, 'other-home-twice'));
      await other.login({ server: service.url, code: (await thisDevice.newEnrollmentCode()).code });

      await expect(thisDevice.backup({ dir: source, bucket: 'Shared' })).rejects.toMatchObject({
        code: 'stale_previous',
        message:
          'another device stored a version to this bucket twice while this backup ran: run the backup again',
      });
      expect(stored).toHaveLength(2);
      const states = async (): Promise<string[]> =>
        (await thisDevice.listVersions({ bucket: 'Shared' })).map((version) => version.state);
      expect((await states()).sort()).toEqual(['active', 'outdated']);

      const again = await thisDevice.backup({ dir: source, bucket: 'Shared' });
      expect(again.bytesUploaded).toBeLessThan(MiB);
      expect((await states()).sort()).toEqual(['active', 'outdated', 'outdated']);
      const target = path.join(scratch, 'restored-twice');
      await thisDevice.restore({ bucket: 'Shared', to: target, overwrite: false });
      expect(readFileSync(path.join(target, 'c.txt'), 'utf8')).toBe('as this device has it');
    } finally {
      await thisDevice.close();
    }
  });
});
