import { mkdtempSync, rmSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import os from 'node:os';
import path from 'node:path';
import { addUser } from '../../server/admin.ts';
import { createBucketService, type BucketService } from '../../server/app.ts';
import { defaultServiceOptions, type ServiceOptions } from '../../server/options.ts';
import { KiB, MiB } from '../../main/protocol/index.ts';

// A real service on loopback with a temporary data folder, small limits, tiny times and an
// injectable clock, as §18 asks. The clock is wall time plus an offset tests can move forward.

export interface TestService {
  readonly service: BucketService;
  readonly url: string;
  readonly api: string;
  readonly dataDir: string;
  /** Moves the service's clock forward. */
  advance(ms: number): void;
  addUser(email: string, quota?: number | null): { userId: string; code: string };
  /** The state of every version the service has made, oldest first. */
  versionStates(): string[];
  close(): Promise<void>;
}

export const SMALL_LIMITS = {
  jsonBodyBytes: 64 * KiB,
  requestDataBytes: 8 * KiB,
  metadataCarBytes: 256 * KiB,
  shardBytes: 4 * MiB,
  blockBytes: 1 * MiB,
  drainBytes: 1 * MiB,
  cidsPerRequest: 100,
  validKeys: 100,
};

export async function startTestService(
  overrides: Partial<ServiceOptions> = {},
  /** Called with the service's Fastify app before it listens, to add hooks. */
  onApp?: (app: FastifyInstance) => void,
): Promise<TestService> {
  // A data folder given is the caller's, and stays after close: a test restarting the service.
  const dataDir = overrides.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'canopy-service-'));
  let offset = 0;
  const options: ServiceOptions = {
    ...defaultServiceOptions(dataDir),
    clock: () => Date.now() + offset,
    limits: SMALL_LIMITS,
    uploadWindowMs: 60_000,
    sweepIntervalMs: 200,
    uploadFailedRetentionMs: 120_000,
    regwaitHoldMs: 300,
    credentialRateLimit: null,
    ipRateLimit: null,
    ...overrides,
  };
  const service = createBucketService(options);
  onApp?.(service.app);
  const url = await service.listen('127.0.0.1', 0);
  return {
    service,
    url,
    api: `${url}/api/v1`,
    dataDir,
    advance(ms) {
      offset += ms;
    },
    addUser(email, quota = null) {
      const { userId, code } = addUser(service.ctx, email, quota);
      return { userId, code };
    },
    versionStates() {
      return service.ctx.db
        .prepare('SELECT state FROM versions ORDER BY seq')
        .pluck()
        .all() as string[];
    },
    async close() {
      try {
        await service.close();
      } finally {
        // Also when closing fails, as a test of a failing database expects it to.
        if (overrides.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}
