/**
 * When and how long to wait before trying a request again: exponential backoff with full
 * jitter, honouring Retry-After on 429 (§5.2, §6). Only retryable failures get here.
 */
export interface RetryPolicy {
  readonly attempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  attempts: 6,
  baseDelayMs: 250,
  maxDelayMs: 30_000,
};

/** Delay before attempt `attempt + 1` (attempt counts from 1), never below a Retry-After. */
export function retryDelayMs(
  policy: RetryPolicy,
  attempt: number,
  retryAfterSeconds: number | undefined,
  random: () => number,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  const jittered = Math.floor(random() * ceiling);
  return retryAfterSeconds === undefined ? jittered : Math.max(retryAfterSeconds * 1000, jittered);
}

export function parseRetryAfter(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header);
  return Number.isFinite(seconds) && seconds >= 0 ? Math.ceil(seconds) : undefined;
}
