import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';

/** The blocks/car requests the embedded service has received; tests reset it to 0. */
export interface BlockRequestCount {
  blocksCar: number;
}

/**
 * An engine on its embedded service (logged in with `loginLocal` by the caller) that counts
 * the blocks/car requests it serves: each asks for a batch of blocks, for a restore or a verify.
 */
export function engineCountingBlockRequests(home: string): {
  engine: Engine;
  count: BlockRequestCount;
} {
  const count: BlockRequestCount = { blocksCar: 0 };
  const engine = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService: (dataDir, options) =>
      startLocalService(dataDir, options, (app) => {
        app.addHook('onRequest', async (request) => {
          if (request.url.endsWith('/blocks/car')) count.blocksCar += 1;
          return Promise.resolve();
        });
      }),
  });
  return { engine, count };
}
