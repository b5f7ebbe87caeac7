import { describe, expect, it } from 'vitest';
import { parse } from '../../../main/service/response-shapes.ts';
import { retryDelayMs } from '../../../main/service/index.ts';
import { errorFromResponse } from '../../../main/service/http-errors.ts';

describe('response shapes', () => {
  const bucket = {
    id: 'b',
    owner_id: 'u',
    name: 'Photos',
    type: 'backup',
    storage_class: 'hot',
    updated_at: '2026-11-22T08:00:00Z',
    replicas: 1,
    effective_replicas: 1,
  };

  it('ignores fields it does not know (§2.9)', () => {
    expect(parse.bucket({ ...bucket, colour: 'green', future: { nested: true } }).name).toBe(
      'Photos',
    );
  });

  it('refuses a known field of the wrong type, and a missing one, as a protocol error', () => {
    expect(() => parse.bucket({ ...bucket, replicas: '1' })).toThrow(/replicas is not number/);
    expect(() => parse.bucket({ ...bucket, name: undefined })).toThrow(/name is not string/);
    expect(() => parse.buckets({})).toThrow(/malformed bucket list/);
  });
});

describe('retry delays and error mapping', () => {
  it('backs off exponentially with full jitter and never waits less than Retry-After', () => {
    const policy = { attempts: 6, baseDelayMs: 100, maxDelayMs: 1000 };
    expect(retryDelayMs(policy, 1, undefined, () => 0.999)).toBe(99);
    expect(retryDelayMs(policy, 4, undefined, () => 0.5)).toBe(400);
    expect(retryDelayMs(policy, 9, undefined, () => 0.999)).toBe(999);
    expect(retryDelayMs(policy, 1, 3, () => 0.5)).toBe(3000);
  });

  it('maps statuses to stable codes, retryable only where a retry can help', () => {
    expect(errorFromResponse(409, { code: 'stale_previous', msg: 'x' })).toMatchObject({
      code: 'stale_previous',
      retryable: false,
    });
    expect(errorFromResponse(413, { code: 'quota_exceeded', msg: 'x' })).toMatchObject({
      code: 'quota_exceeded',
    });
    // The service's own limit names itself; a 413 without its JSON is a proxy's, most likely.
    expect(
      errorFromResponse(413, { code: 'payload_too_large', msg: 'the shard is over 4 MiB' }),
    ).toMatchObject({
      code: 'payload_too_large',
      message: 'too large for the server: the shard is over 4 MiB',
    });
    expect(errorFromResponse(413, undefined).message).toMatch(/proxy.*client_max_body_size/);
    expect(errorFromResponse(503, undefined)).toMatchObject({
      code: 'server_error',
      retryable: true,
    });
    expect(errorFromResponse(429, undefined)).toMatchObject({
      code: 'rate_limited',
      retryable: true,
    });
    expect(errorFromResponse(418, undefined)).toMatchObject({ code: 'protocol', retryable: false });
  });
});
