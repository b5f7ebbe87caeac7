import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { expectRestoredWhole } from '../helpers/restored-whole.ts';

// Another device of the same user deletes the version a backup builds on while the backup reads
// the folder: the service then makes the version before it active again (§10.3), or leaves the
// bucket with none. The backup's push names a version that is no longer active (409
// stale_previous). It must build again on what is active now, and send again the data that
// only the deleted version held: the blocks this device sent for it may be gone from the host.
// Then the new version restores the folder byte for byte.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-previous-deleted-'));
const MiB = 1 << 20;
let service: TestService;

function engineAt(home: string, afterFileRead?: (relativePath: string) => Promise<void>): Engine {
  return createEngine({
    home: path.join(scratch, home),
    secrets: new FileSecretStore(path.join(scratch, home)),
    ...(afterFileRead ? { afterFileRead } : {}),
  });
}

interface TwoDevices {
  readonly thisDevice: Engine;
  readonly other: Engine;
  /** Has the other device delete `version` once, right after this device next reads c.txt. */
  readonly deleteOnNextRead: (version: string) => void;
}

/** This device, logged in as a new user with bucket "Shared", and the user's other device. */
async function twoDevices(name: string): Promise<TwoDevices> {
  let deleted: string | undefined;
  const other = engineAt(`${name}-other-home`);
  const thisDevice = engineAt(`${name}-home`, async (relativePath) => {
    if (deleted === undefined || relativePath !== 'c.txt') return;
    const version = deleted;
    deleted = undefined;
    await other.deleteVersion({ bucket: 'Shared', version });
  });
  const { code } = service.addUser(`${name}@example.org`);
  await thisDevice.login({ server: service.url, code });
  await thisDevice.createBucket({ name: 'Shared', type: 'backup', storageClass: 'hot' });
  await other.login({ server: service.url, code: (await thisDevice.newEnrollmentCode()).code });
  return {
    thisDevice,
    other,
    deleteOnNextRead: (version) => {
      deleted = version;
    },
  };
}

/** A folder of two files of a few MiB and a small text. */
function sourceFolder(name: string): string {
  const source = path.join(scratch, `${name}-source`);
  writeSettled(path.join(source, 'a.bin'), randomBytes(2 * MiB + 3));
  writeSettled(path.join(source, 'b.bin'), randomBytes(3 * MiB + 5));
  writeSettled(path.join(source, 'c.txt'), 'first');
  return source;
}

beforeAll(async () => {
  service = await startTestService({ limits: DEFAULT_LIMITS });
});
afterAll(async () => {
  await service.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the version a backup builds on, deleted by another device meanwhile', () => {
  it('is built on no more: the backup builds on the version made active again, sends what only the deleted one held, and restores', async () => {
    const { thisDevice, other, deleteOnNextRead } = await twoDevices('promoted');
    try {
      const source = sourceFolder('promoted');
      const first = (await thisDevice.backup({ dir: source, bucket: 'Shared' })).versionId;
      writeSettled(path.join(source, 'd.bin'), randomBytes(2 * MiB + 7));
      const second = (await thisDevice.backup({ dir: source, bucket: 'Shared' })).versionId;
      writeSettled(path.join(source, 'c.txt'), 'second');
      deleteOnNextRead(second);

      const third = await thisDevice.backup({ dir: source, bucket: 'Shared' });
      // d.bin was only in the deleted version: it goes again, a.bin and b.bin do not.
      expect(third.bytesUploaded).toBeGreaterThan(2 * MiB);
      expect(third.bytesUploaded).toBeLessThan(3 * MiB);
      const versions = await thisDevice.listVersions({ bucket: 'Shared' });
      expect(versions.map((version) => [version.id, version.state])).toEqual([
        [third.versionId, 'active'],
        [first, 'outdated'],
      ]);
      await expectRestoredWhole(
        thisDevice,
        'Shared',
        source,
        path.join(scratch, 'promoted-restored'),
      );
    } finally {
      await thisDevice.close();
      await other.close();
    }
  });

  it('leaving the bucket with no version: the backup stores the whole folder again, and restores', async () => {
    const { thisDevice, other, deleteOnNextRead } = await twoDevices('emptied');
    try {
      const source = sourceFolder('emptied');
      const first = (await thisDevice.backup({ dir: source, bucket: 'Shared' })).versionId;
      writeSettled(path.join(source, 'c.txt'), 'second');
      deleteOnNextRead(first);

      const second = await thisDevice.backup({ dir: source, bucket: 'Shared' });
      expect(second.bytesUploaded).toBeGreaterThan(5 * MiB);
      const versions = await thisDevice.listVersions({ bucket: 'Shared' });
      expect(versions.map((version) => [version.id, version.state])).toEqual([
        [second.versionId, 'active'],
      ]);
      await expectRestoredWhole(
        thisDevice,
        'Shared',
        source,
        path.join(scratch, 'emptied-restored'),
      );
    } finally {
      await thisDevice.close();
      await other.close();
    }
  });
});
