import { EnvHttpProxyAgent, setGlobalDispatcher } from 'undici';

// A workstation whose network reaches other servers only through an HTTP proxy names it in
// HTTPS_PROXY or HTTP_PROXY (and NO_PROXY for the hosts reached directly), as curl, git and npm
// read them. Node's fetch ignores them, so Canopy reached no server there. With one set, every
// request to a server goes through undici's agent for them, the one both Node's fetch and
// undici's own requests use. The embedded service is reached through its socket, never a proxy.

const PROXY_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy'];

/**
 * Sends this process's requests through the proxy its environment names, if it names one;
 * whether it does. The agent reads the variables itself, NO_PROXY at each request.
 */
export function useProxyFromEnvironment(): boolean {
  if (!PROXY_VARIABLES.some((name) => (process.env[name] ?? '') !== '')) return false;
  setGlobalDispatcher(new EnvHttpProxyAgent());
  return true;
}
