import { expect } from 'vitest';
import type { Engine } from '../../main/index.ts';
import { fingerprintTree } from './tree-fingerprint.ts';

/**
 * Restores the active version of `bucket` into `target`, which must then hold `source` as it
 * is, entry by entry; and every block of the version must come back whole from the server.
 */
export async function expectRestoredWhole(
  engine: Engine,
  bucket: string,
  source: string,
  target: string,
): Promise<void> {
  await engine.restore({ bucket, to: target, overwrite: false });
  expect(fingerprintTree(target)).toEqual(fingerprintTree(source));
  expect(await engine.verify({ bucket, all: true })).toMatchObject({ unavailable: [] });
}
