import { EngineError } from '../api/index.ts';

// An answer that cannot be the service's: every error it sends is JSON of the shape
// {"msg", "code"} (§6), and every JSON route answers JSON. An address that is some other web
// server (a web app whose every path answers its page, a reverse proxy's own 404 at a wrong
// path), or something in front of the service that stops the request (a login page, an access
// rule), answers otherwise. Read as the service's own, a 404 page said "not found on the
// server", a 401 page that this device's key "may have been revoked", and a 200 page that "the
// server sent a body that is not JSON". A 5xx page is still the server failing behind its
// proxy (a 502 while it restarts), and a 413 or 429 page still means what its status says: those
// keep their meaning.

/** Whether `body` (parsed JSON, or undefined) has the shape of the service's errors (§6). */
export function isServiceErrorBody(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const { msg, code } = body as { msg?: unknown; code?: unknown };
  return typeof msg === 'string' && typeof code === 'string';
}

/** Whether a refusal with `status` and a body not the service's is told by notTheService. */
export function refusalNotTheService(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 413 && status !== 429;
}

/** Whether a Content-Type header names JSON. */
export function isJsonType(contentType: string | null): boolean {
  const type = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || type.endsWith('+json');
}

/** What an answer was, in words, by its Content-Type and body. */
function answerKind(contentType: string | null, text: string): string {
  const type = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  if (type === 'text/html' || /^\s*<(!doctype html|html)/i.test(text)) return 'a web page';
  if (text === '') return 'no body';
  return type === '' ? 'a body of no stated type' : `a body of type ${type}`;
}

/** The error for an answer to a request to `url` that is not the service's. */
export function notTheService(
  url: string,
  status: number,
  contentType: string | null,
  text: string,
): EngineError {
  const { origin } = new URL(url);
  const advice =
    status === 401 || status === 403
      ? 'something in front of the server (a login page, an access rule of a proxy) stopped the request: its administrator can let Canopy through'
      : "check the server's address, as its administrator gave it (a service under a path, such as https://example.org/canopy, needs that path)";
  return new EngineError(
    'not_canopy_server',
    `${origin} answered, but not as a Canopy server does (HTTP ${status}, ${answerKind(contentType, text)}): ${advice}`,
  );
}

/**
 * A 404 for a route every Canopy server has (enrollment): the address is not where one
 * answers, whatever answers there. Told in place of "not found on the server".
 */
export function noServiceAt(root: string, cause: unknown): EngineError {
  return new EngineError(
    'not_canopy_server',
    `no Canopy server answers at ${root} (its enrollment is not found there, HTTP 404): check the server's address, as its administrator gave it (a service under a path, such as https://example.org/canopy, needs that path)`,
    { cause },
  );
}
