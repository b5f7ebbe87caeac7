import { afterAll, describe, expect, it } from 'vitest';
import {
  appendFileSync,
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

// A file that changes while it is read is read once more; one that keeps changing is reported.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-changing-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Small files are read in one synchronous read, larger ones chunk by chunk: both are checked. */
const LARGE_PREFIX = 'x'.repeat(300 * 1024) + '\n';

async function backupWhile(name: string, change: (count: number) => boolean, prefix = '') {
  const source = path.join(scratch, name, 'source');
  mkdirSync(source, { recursive: true });
  writeFileSync(path.join(source, 'live.log'), `${prefix}line 1\n`);
  writeFileSync(path.join(source, 'still.txt'), 'still');
  const home = path.join(scratch, name, 'home');
  let reads = 0;
  const engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService,
    afterFileRead: (relativePath) => {
      if (relativePath === 'live.log' && change((reads += 1))) {
        // A later mtime second, so the change shows even on coarse clocks.
        appendFileSync(path.join(source, 'live.log'), `line ${reads + 1}\n`);
        const future = new Date(Date.now() + reads * 2000);
        utimesSync(path.join(source, 'live.log'), future, future);
      }
      return Promise.resolve();
    },
  });
  try {
    await engine.loginLocal({});
    await engine.createBucket({ name: 'Live', type: 'backup', storageClass: 'hot' });
    const result = await engine.backup({ dir: source, bucket: 'Live' });
    const target = path.join(scratch, name, 'restored');
    await engine.restore({ bucket: 'Live', to: target, overwrite: false });
    return {
      result,
      restored: readFileSync(path.join(target, 'live.log'), 'utf8'),
      current: readFileSync(path.join(source, 'live.log'), 'utf8'),
    };
  } finally {
    await engine.close();
  }
}

describe('files that change while read', () => {
  it('re-reads a file that changed once and stores its settled content', async () => {
    const { result, restored, current } = await backupWhile('once', (count) => count === 1);
    expect(result.changedWhileRead).toEqual([]);
    expect(restored).toBe(current);
    expect(restored).toBe('line 1\nline 2\n');
  });

  it('reports a file that keeps changing', async () => {
    const { result } = await backupWhile('always', () => true);
    expect(result.changedWhileRead).toEqual(['live.log']);
    expect(result.files).toBe(2);
  });

  it('re-reads a large file that changed once, and reports one that keeps changing', async () => {
    const once = await backupWhile('large-once', (count) => count === 1, LARGE_PREFIX);
    expect(once.result.changedWhileRead).toEqual([]);
    expect(once.restored).toBe(`${LARGE_PREFIX}line 1\nline 2\n`);
    const always = await backupWhile('large-always', () => true, LARGE_PREFIX);
    expect(always.result.changedWhileRead).toEqual(['live.log']);
  });
});
