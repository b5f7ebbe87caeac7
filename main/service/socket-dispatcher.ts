import { Agent, type Dispatcher, Pool } from 'undici';

/**
 * An undici dispatcher that reaches `origin` through the Unix socket at `socketPath`, and any
 * other origin over the network as usual: for the embedded service, whose storage host is its
 * own origin (cli/local-service.ts says why).
 */
export function socketDispatcher(origin: string, socketPath: string): Dispatcher {
  const target = new URL(origin).origin;
  return new Agent({
    factory: (to, options) =>
      new Pool(
        to,
        new URL(String(to)).origin === target ? { ...options, connect: { socketPath } } : options,
      ),
  });
}
