import { EngineError } from '../api/index.ts';

const LOOPBACK_HOSTS = new Set(['localhost', '[::1]', '::1']);

export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * Normalizes a server URL (no trailing slash) and refuses plain http to anything but loopback
 * (§2.2, §16.6): a device JWT must never cross a network in clear text.
 */
export function checkServiceUrl(input: string): string {
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    throw new EngineError('usage', `"${input}" is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    // Not a server Canopy can speak to at all: the command was written wrong, as for "not a URL".
    throw new EngineError('usage', `${url.protocol} URLs are not supported; use https://`);
  }
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname)) {
    throw new EngineError(
      'insecure_url',
      `refusing plain http to ${url.hostname}; use https:// (http is allowed only for this computer)`,
    );
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}
