import type { TokenBucketOptions } from '../options.ts';

// Token buckets per key (a credential, or a client IP), refilled continuously (§5.2).
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly options: TokenBucketOptions;

  constructor(options: TokenBucketOptions) {
    this.options = options;
  }

  /** Takes one token; returns 0 when granted, else the whole seconds (≥ 1) until one is free. */
  take(key: string, nowMs: number): number {
    const { burst, refillPerSecond } = this.options;
    const bucket = this.buckets.get(key) ?? { tokens: burst, at: nowMs };
    bucket.tokens = Math.min(burst, bucket.tokens + ((nowMs - bucket.at) / 1000) * refillPerSecond);
    bucket.at = nowMs;
    this.buckets.set(key, bucket);
    if (this.buckets.size > 100_000) this.evictFull(nowMs);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / refillPerSecond));
  }

  /** Forgets buckets that have refilled completely; they behave exactly like new ones. */
  private evictFull(nowMs: number): void {
    const { burst, refillPerSecond } = this.options;
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((nowMs - bucket.at) / 1000) * refillPerSecond >= burst)
        this.buckets.delete(key);
    }
  }
}
