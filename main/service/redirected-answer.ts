import { EngineError } from '../api/index.ts';

// The service's address answered a request with a redirect (3xx): a server moved to another
// address and left one behind, a reverse proxy sending http to https or one name to another,
// or a network that wants a sign-in first. Canopy does not follow it. A device's token is made
// out for the address it enrolled with (§5.1 `aud`), fetch drops it on the way to another
// origin, and turns a POST into a GET on a 301 or 302: followed, a moved server answered "the
// key may have been revoked" (401), and the user was sent to enroll again for nothing. The
// answer is told as it is, with where it points, and not retried: asking again gets the same.

/**
 * The service's new address, from where a redirect of a request for `apiPath` points: the
 * place of its root when the location keeps that path below it, else the location's origin.
 */
function movedRoot(location: URL, apiPath: string): string {
  const below = location.pathname.endsWith(apiPath)
    ? location.pathname.slice(0, location.pathname.length - apiPath.length)
    : undefined;
  return below === undefined ? location.origin : `${location.origin}${below}`;
}

/** A request answered with a redirect. */
export interface RedirectedRequest {
  readonly url: string;
  /** The part of `url` below the service's root. */
  readonly apiPath: string;
  /** Whether the device is enrolled there (else the request enrolls it, or waits to be). */
  readonly enrolled: boolean;
  /** The answer's status; null when fetch refused the redirect without telling it. */
  readonly status: number | null;
  /** Its Location header; null when it gave none, or fetch did not tell it. */
  readonly location: string | null;
}

/**
 * Whether fetch failed because the answer was a redirect it was told to refuse (`redirect:
 * 'error'`, for a streamed body): a TypeError whose cause says so, in the words of Node 20's
 * undici (6.x) and of undici 7 alike.
 */
export function isRefusedRedirect(error: unknown): boolean {
  return (
    error instanceof TypeError &&
    error.cause instanceof Error &&
    error.cause.message === 'unexpected redirect'
  );
}

/** The error for a redirect, telling where it points and what to do about it. */
export function redirectedError(request: RedirectedRequest): EngineError {
  const asked = new URL(request.url);
  let target: URL | undefined;
  try {
    target = request.location === null ? undefined : new URL(request.location, asked);
  } catch {
    target = undefined;
  }
  const where =
    request.status === null
      ? 'redirected its request'
      : target === undefined
        ? `redirected its request (HTTP ${request.status}) without saying where to`
        : `sent Canopy on to ${target.href} (HTTP ${request.status})`;
  const root = target === undefined ? undefined : movedRoot(target, request.apiPath);
  const moved =
    root === undefined
      ? ''
      : request.enrolled
        ? `if the server has moved there, log in at its new address (canopy logout, then canopy login --server ${root}); `
        : `if the server has moved there, use its new address, ${root}; `;
  return new EngineError(
    'redirected',
    `${asked.origin} ${where} rather than answering as a Canopy server: ${moved}a network that wants you to sign in first (a hotel's or café's Wi-Fi) answers so too: sign in from a web browser, then try again`,
  );
}
