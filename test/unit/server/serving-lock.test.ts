import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ServingLock } from '../../../server/store/serving-lock.ts';

// Two Canopy commands started at once each start the embedded service on the same data folder:
// the first alone clears what a crash left, under the exclusive lock; the second must wait for
// that and then serve beside it, not fail to start ("database is locked", seen in CI).

const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-serving-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the serving lock', () => {
  it('lets a second server wait for a first one recovering alone, then serve beside it', async () => {
    const moduleUrl = new URL('../../../server/store/serving-lock.ts', import.meta.url).href;
    // The first server: alone, it recovers for half a second, then serves for a while.
    const first = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `const { ServingLock } = await import(${JSON.stringify(moduleUrl)});
         const { lock, recovered } = ServingLock.acquire(${JSON.stringify(dir)}, () => {
           process.stdout.write('recovering\\n');
           Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
         });
         process.stdout.write(recovered ? 'serving alone\\n' : 'serving beside\\n');
         setTimeout(() => lock.release(), 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let said = '';
    const saying = (text: string) =>
      new Promise<void>((resolve) => {
        const look = (chunk: Buffer) => {
          said += chunk.toString();
          if (said.includes(text)) resolve();
        };
        first.stdout.on('data', look);
      });
    await saying('recovering');
    const started = performance.now();
    const second = ServingLock.acquire(dir, () => {
      throw new Error('the second server recovered although the first serves');
    });
    try {
      expect(second.recovered).toBe(false);
      // It waited for the first one's recovery to end.
      expect(performance.now() - started).toBeGreaterThan(200);
    } finally {
      second.lock.release();
    }
    await new Promise((resolve) => first.on('exit', resolve));
    expect(said).toContain('serving alone');
  });
});
