import { describe, expect, it } from 'vitest';
import { TokenBuckets } from '../../../server/auth/token-bucket.ts';

describe('TokenBuckets', () => {
  it('grants the burst, then asks to wait whole seconds until one token has refilled', () => {
    const buckets = new TokenBuckets({ burst: 10, refillPerSecond: 10 / 60 });
    const now = 1_000_000;
    for (let i = 0; i < 10; i += 1) expect(buckets.take('ip:1', now)).toBe(0);
    expect(buckets.take('ip:1', now)).toBe(6);
    expect(buckets.take('ip:2', now)).toBe(0);
    expect(buckets.take('ip:1', now + 6_000)).toBe(0);
    expect(buckets.take('ip:1', now + 6_000)).toBeGreaterThanOrEqual(1);
  });
});
