import { describe, expect, it } from 'vitest';
import { networkError } from '../../../main/service/http-errors.ts';

// A proxy's refusal of the tunnel, as undici's ProxyAgent raises it inside fetch's failure.
function refusedBy(status: number): TypeError {
  return new TypeError('fetch failed', {
    cause: new Error(`Proxy response (${status}) !== 200 when HTTP Tunneling`),
  });
}

describe("a proxy's refusal to reach the server", () => {
  it('is told with what to do about it, and not retried', () => {
    const url = 'https://backup.example.org/api/v1/buckets';
    expect(networkError(url, refusedBy(403))).toMatchObject({
      code: 'proxy_refused',
      retryable: false,
      message:
        "the proxy would not reach https://backup.example.org: it refused the way there (HTTP 403); the proxy's administrator can let it through, or NO_PROXY can name the server to reach it directly",
    });
    expect(networkError(url, refusedBy(407)).message).toContain('it asks for a login');
    // Another failure of the same kind of error stays a network one, retried.
    expect(
      networkError(url, new TypeError('fetch failed', { cause: new Error('other side closed') })),
    ).toMatchObject({ code: 'network', retryable: true });
  });
});
