import { afterAll, describe, expect, it } from 'vitest';
import {
  appendFileSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';

// The file index lets a backup skip files whose size, mtime and inode are as recorded. Two kinds
// of entry must not be recorded, or a later change that keeps all three would never be backed
// up: a file modified right before the scan (a change in the same clock tick leaves its mtime
// as it was), and a file that kept changing while it was read (what was read may be torn).
// Each case below makes such a change and checks that the next backup stores it.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-index-trust-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

type Hook = (relativePath: string) => void;

async function withEngine<T>(
  name: string,
  run: (engine: ReturnType<typeof createEngine>, source: string) => Promise<T>,
  hook: { current: Hook } = { current: () => undefined },
): Promise<T> {
  const source = path.join(scratch, name, 'source');
  mkdirSync(source, { recursive: true });
  const home = path.join(scratch, name, 'home');
  const engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService,
    afterFileRead: (relativePath) => {
      hook.current(relativePath);
      return Promise.resolve();
    },
  });
  try {
    await engine.loginLocal({});
    await engine.createBucket({ name: 'Trust', type: 'backup', storageClass: 'hot' });
    return await run(engine, source);
  } finally {
    await engine.close();
  }
}

async function restoredText(
  engine: ReturnType<typeof createEngine>,
  to: string,
  file: string,
): Promise<string> {
  await engine.restore({ bucket: 'Trust', to, overwrite: false });
  return readFileSync(path.join(to, file), 'utf8');
}

describe('entries the file index does not trust', () => {
  it('a file modified right before a backup is read again by the next, and a same-size change in the same second is stored', async () => {
    await withEngine('fresh', async (engine, source) => {
      const file = path.join(source, 'fresh.txt');
      writeFileSync(file, 'first draft');
      writeFileSync(path.join(source, 'old.txt'), 'settled');
      const aMinuteAgo = new Date(Date.now() - 60_000);
      utimesSync(path.join(source, 'old.txt'), aMinuteAgo, aMinuteAgo);
      // A whole second just passed: the backup's scan starts within the two seconds after it.
      const thisSecond = new Date(Math.floor(Date.now() / 1000) * 1000);
      utimesSync(file, thisSecond, thisSecond);
      await engine.backup({ dir: source, bucket: 'Trust' });
      // Same inode, same size, same mtime: only the bytes differ.
      const inode = lstatSync(file).ino;
      writeFileSync(file, 'final draft');
      utimesSync(file, thisSecond, thisSecond);
      expect(lstatSync(file).ino).toBe(inode);
      const second = await engine.backup({ dir: source, bucket: 'Trust' });
      expect(second.unchanged).toBe(false);
      expect(second.filesUnchanged).toBe(1);
      expect(await restoredText(engine, path.join(scratch, 'fresh', 'restored'), 'fresh.txt')).toBe(
        'final draft',
      );
    });
  });

  it('a file that kept changing while read is read again by the next backup', async () => {
    const hook: { current: Hook } = { current: () => undefined };
    await withEngine(
      'torn',
      async (engine, source) => {
        const file = path.join(source, 'live.log');
        writeFileSync(file, 'line 1\n');
        const aMinuteAgo = Date.now() - 60_000;
        utimesSync(file, new Date(aMinuteAgo), new Date(aMinuteAgo));
        // Each read is followed by a write and a new mtime, as a log being written would be.
        // The last read's size and mtime are what the walk saw: what an entry would record.
        let mtime = new Date(aMinuteAgo);
        let seen = { size: 0, mtime };
        let writes = 0;
        hook.current = (relativePath) => {
          if (relativePath !== 'live.log') return;
          seen = { size: lstatSync(file).size, mtime };
          writes += 1;
          appendFileSync(file, `line ${writes + 1}\n`);
          mtime = new Date(aMinuteAgo + writes * 2000);
          utimesSync(file, mtime, mtime);
        };
        const first = await engine.backup({ dir: source, bucket: 'Trust' });
        expect(first.changedWhileRead).toEqual(['live.log']);
        hook.current = () => undefined;
        // The file as the torn read's entry describes it, with other bytes.
        writeFileSync(file, 'X'.repeat(seen.size));
        utimesSync(file, seen.mtime, seen.mtime);
        const second = await engine.backup({ dir: source, bucket: 'Trust' });
        expect(second.changedWhileRead).toEqual([]);
        expect(await restoredText(engine, path.join(scratch, 'torn', 'restored'), 'live.log')).toBe(
          'X'.repeat(seen.size),
        );
      },
      hook,
    );
  });
});
