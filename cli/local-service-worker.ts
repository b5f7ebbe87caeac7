// The embedded service's thread: it runs the Bucket Storage Service so that the server's work
// (parsing and hashing shards, writing blocks) uses another core than the engine's.
import { parentPort, workerData } from 'node:worker_threads';
import { startInProcessLocalService } from './local-service.ts';

export type LocalServiceRequest = { type: 'code' } | { type: 'close' };
export type LocalServiceReply =
  | { type: 'listening'; url: string }
  | { type: 'code'; code: string }
  | { type: 'closed' }
  | { type: 'error'; message: string };

const port = parentPort;
if (!port) throw new Error('local-service-worker must run in a worker thread');
const { dataDir } = workerData as { dataDir: string };

try {
  const service = await startInProcessLocalService(dataDir);
  port.on('message', (request: LocalServiceRequest) => {
    void (async () => {
      try {
        if (request.type === 'code') {
          port.postMessage({
            type: 'code',
            code: await service.enrollmentCode(),
          } satisfies LocalServiceReply);
        } else {
          await service.close();
          port.postMessage({ type: 'closed' } satisfies LocalServiceReply);
          port.close();
        }
      } catch (error) {
        port.postMessage({
          type: 'error',
          message: error instanceof Error ? error.message : String(error),
        } satisfies LocalServiceReply);
      }
    })();
  });
  port.postMessage({ type: 'listening', url: service.url } satisfies LocalServiceReply);
} catch (error) {
  port.postMessage({
    type: 'error',
    message: error instanceof Error ? error.message : String(error),
  } satisfies LocalServiceReply);
}
