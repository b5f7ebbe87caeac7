import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { firstBackup } from '../helpers/first-backup.ts';

// kill -9 in the middle of a restore, then restore again: nothing is left under a temporary
// name, and the folder holds the version as it is.

const here = path.dirname(fileURLToPath(import.meta.url));
const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restore-crash-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every file below `dir`, by its path below it. */
function filesBelow(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
    .sort();
}

describe('a restore killed part-way', () => {
  it('leaves nothing under a temporary name once a restore runs again, even after its disk was away', async () => {
    const source = path.join(scratch, 'source');
    for (const folder of ['letters', 'photos']) {
      mkdirSync(path.join(source, folder), { recursive: true });
      for (let i = 0; i < 20; i += 1)
        writeFileSync(path.join(source, folder, `item-${i}.bin`), randomBytes(64 * 1024));
    }
    writeFileSync(path.join(source, 'photos', 'large.bin'), randomBytes(3 << 20));
    const home = path.join(scratch, 'home');
    const engine = () =>
      createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
    const setup = engine();
    await firstBackup(setup, source, 'Crash');
    await setup.close();

    const target = path.join(scratch, 'restored');
    const crashed = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(here, '..', 'helpers', 'crashing-restore.ts'),
        home,
        'Crash',
        target,
        '12',
      ],
      { encoding: 'utf8' },
    );
    expect(crashed.signal).toBe('SIGKILL');
    const temporaries = (): string[] =>
      filesBelow(target).filter((file) => path.basename(file).startsWith('.canopy-restore-'));
    const left = temporaries();
    expect(left.length).toBeGreaterThan(0);

    const again = engine();
    try {
      // Its folder out of reach, as on a disk not mounted now: a restore elsewhere goes on,
      // and the stopped one's mark stays for when it is back.
      renameSync(target, `${target}-unmounted`);
      const elsewhere = await again.restore({
        bucket: 'Crash',
        path: 'letters',
        to: path.join(scratch, 'elsewhere'),
        overwrite: false,
      });
      expect(elsewhere).toMatchObject({ files: 20, leftoversRemoved: 0 });
      renameSync(`${target}-unmounted`, target);
      expect(temporaries()).toEqual(left);

      // Run again as a user would, without --overwrite: any file the first run renamed into
      // place is left as it is, and no file gets a copy beside it.
      const renamedBefore = filesBelow(target).length - left.length;
      const result = await again.restore({ bucket: 'Crash', to: target, overwrite: false });
      expect(result).toMatchObject({
        leftoversRemoved: left.length,
        alreadyThere: renamedBefore,
        files: 41 - renamedBefore,
        renamed: [],
      });
    } finally {
      await again.close();
    }
    expect(temporaries()).toEqual([]);
    expect(filesBelow(target)).toEqual(filesBelow(source));
    for (const file of filesBelow(source))
      expect(
        readFileSync(path.join(target, file)).equals(readFileSync(path.join(source, file))),
      ).toBe(true);
    // The stopped restore's mark went with its leftovers, and the second's with its end.
    expect(
      readdirSync(path.join(home, 'locks')).filter((name) => name.startsWith('restore-')),
    ).toEqual([]);
  });
});
