import { enrollmentCodeCreatingUser } from '../server/admin.ts';
import { createBucketService } from '../server/app.ts';
import { defaultServiceOptions } from '../server/options.ts';
import type { LocalService } from '../main/index.ts';

// Canopy's embedded Bucket Storage Service, in this process on a free loopback port, for one
// data folder (this computer or an external disk). No account is needed: the folder has one
// local user, and each device enrolls with a fresh code.

export const LOCAL_USER_EMAIL = 'local@canopy.invalid';

export async function startLocalService(dataDir: string): Promise<LocalService> {
  const service = createBucketService(defaultServiceOptions(dataDir));
  const url = await service.listen('127.0.0.1', 0);
  return {
    url,
    enrollmentCode() {
      return Promise.resolve(enrollmentCodeCreatingUser(service.ctx, LOCAL_USER_EMAIL).code);
    },
    close: () => service.close(),
  };
}
