import type { FastifyInstance } from 'fastify';
import type { LocalService } from '../main/index.ts';
import { enrollmentCodeCreatingUser } from '../server/admin.ts';
import { createBucketService } from '../server/app.ts';
import { defaultServiceOptions } from '../server/options.ts';

// Canopy's embedded Bucket Storage Service for one data folder (this computer or an external
// disk), on a free loopback port, in this process. No account is needed: the folder has one
// local user, and each device enrolls with a fresh code.
//
// It runs on the engine's own thread. A worker thread of its own was tried: backup and restore
// were no faster (packing and uploading are separate phases, and both are bound by the disk),
// and the second JavaScript heap cost about 100 MB of peak memory.

export const LOCAL_USER_EMAIL = 'local@canopy.invalid';

/** `observe` lets tests watch the requests the service receives. */
export async function startLocalService(
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
