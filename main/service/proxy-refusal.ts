// An HTTP proxy that would not open the way to the server (its CONNECT answered other than 200):
// it asks for a login (407), or its rules keep the server out (403, and the like). Asking again
// changes neither, so it is not retried as a network failure is, and the user is told what the
// proxy said rather than "cannot reach" the server. undici says so only in its error's words.

const TUNNEL_REFUSED = /^Proxy response \((\d{3})\) !== 200 when HTTP Tunneling$/;

/** The status the proxy refused the tunnel with, or undefined for another failure. */
export function proxyRefusalOf(error: unknown): number | undefined {
  let cause: unknown = error;
  for (let depth = 0; depth < 4 && cause instanceof Error; depth += 1) {
    const refused = TUNNEL_REFUSED.exec(cause.message);
    if (refused) return Number(refused[1]);
    cause = cause.cause;
  }
  return undefined;
}

/** What a proxy's refusal with `status` means, and what to do about it, for the message. */
export function proxyRefusalAdvice(status: number): string {
  return status === 407
    ? 'it asks for a login: put yours in its address in HTTPS_PROXY (http://user:password@proxy:port)'
    : `it refused the way there (HTTP ${status}); the proxy's administrator can let it through, or NO_PROXY can name the server to reach it directly`;
}
