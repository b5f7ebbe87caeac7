import { Worker } from 'node:worker_threads';
import type { FastifyInstance } from 'fastify';
import type { LocalService } from '../main/index.ts';
import { enrollmentCodeCreatingUser } from '../server/admin.ts';
import { createBucketService } from '../server/app.ts';
import { defaultServiceOptions } from '../server/options.ts';
import type { LocalServiceReply, LocalServiceRequest } from './local-service-worker.ts';

// Canopy's embedded Bucket Storage Service for one data folder (this computer or an external
// disk), on a free loopback port, in a worker thread of this process. No account is needed: the
// folder has one local user, and each device enrolls with a fresh code.

export const LOCAL_USER_EMAIL = 'local@canopy.invalid';

export async function startLocalService(dataDir: string): Promise<LocalService> {
  // The worker registers the same TypeScript loader as this process, then loads its module.
  const bootstrap = `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(
    new URL('./local-service-worker.ts', import.meta.url).href,
  )}); })`;
  const worker = new Worker(bootstrap, { eval: true, workerData: { dataDir } });
  const next = (): Promise<LocalServiceReply> =>
    new Promise((resolve, reject) => {
      const onError = (error: Error): void => {
        worker.off('message', onMessage);
        reject(error);
      };
      const onMessage = (reply: LocalServiceReply): void => {
        worker.off('error', onError);
        resolve(reply);
      };
      worker.once('message', onMessage);
      worker.once('error', onError);
    });
  const ask = async (request: LocalServiceRequest): Promise<LocalServiceReply> => {
    const reply = next();
    worker.postMessage(request);
    return reply;
  };
  const first = await next();
  if (first.type !== 'listening') {
    await worker.terminate();
    throw new Error(first.type === 'error' ? first.message : 'the local service did not start');
  }
  return {
    url: first.url,
    async enrollmentCode() {
      const reply = await ask({ type: 'code' });
      if (reply.type !== 'code')
        throw new Error(reply.type === 'error' ? reply.message : 'no enrollment code');
      return reply.code;
    },
    async close() {
      await ask({ type: 'close' });
      await worker.terminate();
    },
  };
}

/**
 * The same service on this thread: for hosts that must not load code later (a process that
 * drops privileges) and for tests that watch the requests it receives (`observe`).
 */
export async function startInProcessLocalService(
  dataDir: string,
  observe?: (app: FastifyInstance) => void,
): Promise<LocalService> {
  const service = createBucketService(defaultServiceOptions(dataDir));
  observe?.(service.app);
  const url = await service.listen('127.0.0.1', 0);
  return {
    url,
    enrollmentCode: () =>
      Promise.resolve(enrollmentCodeCreatingUser(service.ctx, LOCAL_USER_EMAIL).code),
    close: () => service.close(),
  };
}
