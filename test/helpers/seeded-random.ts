import { createCipheriv, createHash } from 'node:crypto';

// Random choices that repeat: xorshift32 from a seed, so a randomised test that fails fails the
// same way again (and another seed, from the test's environment variable, tries other ways).

export interface SeededRandom {
  /** In [0, 1). */
  readonly next: () => number;
  /** An integer in [0, n). */
  readonly below: (n: number) => number;
  /** One of `items`; undefined when there are none. */
  readonly pick: <T>(items: readonly T[]) => T | undefined;
}

export function seededRandom(seed: number): SeededRandom {
  let state = seed >>> 0 || 1;
  const next = (): number => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 0x1_0000_0000;
  };
  const below = (n: number): number => Math.floor(next() * n);
  return {
    next,
    below,
    pick: (items) => (items.length === 0 ? undefined : items[below(items.length)]),
  };
}

/**
 * `length` bytes that look random and are the same for the same seed: AES-128-CTR over zeros,
 * keyed by the seed, so a test on "random" content fails the same way again.
 */
export function seededBytes(seed: number, length: number): Buffer {
  const key = createHash('sha256').update(`canopy-test-bytes-${seed}`).digest().subarray(0, 16);
  const cipher = createCipheriv('aes-128-ctr', key, Buffer.alloc(16));
  return Buffer.concat([cipher.update(Buffer.alloc(length)), cipher.final()]);
}
