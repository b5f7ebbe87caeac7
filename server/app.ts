import { createServer, type Server } from 'node:net';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import {
  API_PREFIX,
  DAMAGED_DATABASE_MSG,
  DATA_FILE_MISSING_MSG,
  DISK_FAILED_MSG,
  OUT_OF_SPACE_MSG,
  READ_ONLY_MSG,
  ValidationError,
  type ErrorBody,
} from '../main/protocol/index.ts';
import { authenticateDevice, authenticateStorage, type AuthSettings } from './auth/authenticate.ts';
import type { TokenBuckets } from './auth/token-bucket.ts';
import { ServiceContext } from './context.ts';
import { isDamagedDatabase } from './store/damaged-database.ts';
import { ServiceError } from './errors.ts';
import { isDiskFailure, isLostDataFile } from './store/disk-failure.ts';
import { isOutOfSpace } from './store/out-of-space.ts';
import { ServingLock } from './store/serving-lock.ts';
import {
  isDatabaseMarkedDamaged,
  keepDatabaseCopy,
  markDatabaseDamaged,
  putBackKeptCopy,
  type DatabaseRestore,
} from './store/kept-database-copy.ts';
import { drainRequest } from './http/request-body.ts';
import type { ServiceOptions } from './options.ts';
import { problemLogStream } from './problem-log.ts';
import { ROUTES, type RouteSpec } from './routes/index.ts';
import type { RouteRequest } from './routes/route-spec.ts';

// Builds the Fastify server for the Bucket Storage Service. Bodies are never parsed by
// Fastify: each handler reads its own, so that checks run in the order §6 prescribes.

export interface BucketService {
  readonly app: FastifyInstance;
  readonly ctx: ServiceContext;
  /** Starts listening and the expiry sweep; returns the base URL. */
  listen(host: string, port: number): Promise<string>;
  /**
   * Also answers on a Unix socket at `socketPath` (after `listen`), for a client in the same
   * process or on the same machine: the embedded service (cli/local-service.ts). Rejects if the
   * socket cannot be made there.
   */
  listenOnSocket(socketPath: string): Promise<void>;
  /**
   * Set when this start found the database damaged and put the kept copy in its place
   * (store/kept-database-copy.ts).
   */
  readonly restoredDatabase: DatabaseRestore | undefined;
  close(): Promise<void>;
}

function rateLimited(limiter: TokenBuckets | null, key: string, now: number): void {
  const wait = limiter?.take(key, now) ?? 0;
  if (wait > 0) {
    throw new ServiceError('rate_limited', 'too many requests', { 'retry-after': String(wait) });
  }
}

function errorBody(
  error: unknown,
  dataDir: string,
): {
  status: number;
  body: ErrorBody;
  headers: Record<string, string>;
} {
  if (error instanceof ServiceError) {
    return {
      status: error.status,
      body: { msg: error.message, code: error.code },
      headers: { ...error.headers },
    };
  }
  if (error instanceof ValidationError) {
    return { status: 400, body: { msg: error.message, code: 'invalid_request' }, headers: {} };
  }
  // A full disk is the operator's to fix, and telling them so reveals nothing about the code.
  if (isOutOfSpace(error)) {
    return {
      status: 500,
      body: { msg: OUT_OF_SPACE_MSG, code: 'internal' },
      headers: {},
    };
  }
  // Saying so reveals nothing either, and tells the operator where to look.
  if (isDamagedDatabase(error)) {
    return {
      status: 500,
      body: { msg: DAMAGED_DATABASE_MSG, code: 'internal' },
      headers: {},
    };
  }
  // The same: its disk is failing (and its log names the file).
  if (isDiskFailure(error)) {
    return {
      status: 500,
      body: { msg: DISK_FAILED_MSG, code: 'internal' },
      headers: {},
    };
  }
  // And a file of its data gone from the disk.
  if (isLostDataFile(error, dataDir)) {
    return {
      status: 500,
      body: { msg: DATA_FILE_MISSING_MSG, code: 'internal' },
      headers: {},
    };
  }
  return { status: 500, body: { msg: 'internal error', code: 'internal' }, headers: {} };
}

/**
 * The service's context on its data folder, with the kept copy of its database put back first
 * when a request found the database damaged, or when it cannot even be opened.
 */
function openContext(options: ServiceOptions): {
  ctx: ServiceContext;
  restoredDatabase: DatabaseRestore | undefined;
} {
  const { dataDir, readOnly } = options;
  const putBack = (): DatabaseRestore | undefined =>
    readOnly === true || !isDatabaseMarkedDamaged(dataDir)
      ? undefined
      : ServingLock.whenAlone(dataDir, () => putBackKeptCopy(dataDir, options.clock()));
  let restoredDatabase = putBack();
  try {
    return { ctx: new ServiceContext(options), restoredDatabase };
  } catch (error) {
    if (readOnly === true || restoredDatabase || !isDamagedDatabase(error)) throw error;
    markDatabaseDamaged(dataDir);
    restoredDatabase = putBack();
    if (!restoredDatabase) throw error;
    return { ctx: new ServiceContext(options), restoredDatabase };
  }
}

/** What compiles a route's schema, for a service whose routes have none: says so if one does. */
function noSchemaCompiler(): () => never {
  return () => {
    throw new Error(
      'routes of the Bucket Storage Service take no schema: they check requests with the field rules of main/protocol/requests.ts',
    );
  };
}

/** While it serves, the database is copied (when it changed) at most this often. */
const DATABASE_COPY_EVERY_MS = 60 * 60 * 1000;
/**
 * How long each sweep may give free pages of the database back to the disk: in steps of a few
 * milliseconds, each a write the requests wait for; what is left, the next sweep goes on with.
 */
const FREE_PAGES_RELEASE_MS = 500;

export function createBucketService(options: ServiceOptions): BucketService {
  const { ctx, restoredDatabase } = openContext(options);
  const app = Fastify({
    logger: options.logRequests
      ? {
          level: 'info',
          // §16.4: no credential ever reaches a log line. Headers are not logged at all, and
          // the query string is dropped because a careless client may put a token there.
          serializers: {
            req: (request: FastifyRequest) => ({
              method: request.method,
              url: request.url.split('?')[0] ?? '',
              remoteAddress: request.ip,
            }),
          },
        }
      : options.problemLog !== undefined
        ? { level: 'warn', stream: problemLogStream(options.problemLog) }
        : false,
    // Proxies and load balancers own timeouts; large shards on slow links need time.
    requestTimeout: 0,
    bodyLimit: 1,
    return503OnClosing: false,
    // No route has a schema: each checks its request with the spec's field rules
    // (main/protocol/requests.ts). Fastify's own compilers (Ajv, fast-json-stringify) would load for nothing,
    // about 0.1 s of every start, and embedded that is every command's.
    schemaController: {
      compilersFactory: { buildValidator: noSchemaCompiler, buildSerializer: noSchemaCompiler },
    },
  });
  // Without a log, the context's own report (a process warning on stderr) stays.
  if (options.logRequests || options.problemLog !== undefined)
    ctx.onHousekeepingFailure = (error, what) => app.log.error({ err: error }, `could not ${what}`);
  // Before the first request: what a crash left half-written in the block store goes, unless
  // another process serves this folder too and may be writing it.
  // On a read-only disk nothing can be half-written by anyone, and no lock can be made.
  const serving = options.readOnly
    ? null
    : ServingLock.acquire(options.dataDir, () => {
        const recovered = ctx.recoverStore();
        if (recovered.staged + recovered.orphanPacks + recovered.uploadPins > 0)
          app.log.warn(
            recovered,
            'removed staged files, uncommitted packs and upload pins left by a crash',
          );
      });
  if (serving?.recovered === false)
    app.log.info('another process serves this data folder; crash recovery waits for a lone start');
  const settings: AuthSettings = {
    leewaySeconds: options.clockLeewaySeconds,
    uploadWindowSeconds: Math.ceil(options.uploadWindowMs / 1000),
  };

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => {
    done(null);
  });

  app.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const { status, body, headers } = errorBody(error, options.dataDir);
    if (status === 500)
      request.log.error(
        { err: error, route: `${request.method} ${request.routeOptions.url ?? ''}` },
        'request failed',
      );
    // The next lone start puts the kept copy in its place. A disk that refuses even this word
    // fails the next request alike, and is asked again then.
    if (isDamagedDatabase(error) && options.readOnly !== true) {
      try {
        markDatabaseDamaged(options.dataDir);
      } catch (markError) {
        request.log.error({ err: markError }, 'could not leave word of the damaged database');
      }
    }
    // An early answer: read at most the drain amount of the rest, then hang up (§14).
    drainRequest(request.raw, options.limits.drainBytes);
    return reply.code(status).headers(headers).type('application/json').send(body);
  });
  app.setNotFoundHandler((request, reply) => {
    drainRequest(request.raw, options.limits.drainBytes);
    return reply.code(404).type('application/json').send({ msg: 'not found', code: 'not_found' });
  });

  // Every answer states the time by the clock the service judges tokens and upload windows by
  // (§5.1, §10.2), which clients correct their own by; Node's own Date would be the system's.
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('date', new Date(ctx.now()).toUTCString());
    return Promise.resolve();
  });

  if (options.corsOrigins.length > 0) {
    const allowed = new Set(options.corsOrigins);
    app.addHook('onRequest', async (request, reply) => {
      const origin = request.headers.origin;
      if (origin !== undefined && allowed.has(origin)) {
        reply.header('access-control-allow-origin', origin).header('vary', 'Origin');
      }
      return Promise.resolve();
    });
    app.options('*', (request, reply) => {
      const origin = request.headers.origin;
      if (origin === undefined || !allowed.has(origin)) {
        return reply
          .code(404)
          .type('application/json')
          .send({ msg: 'not found', code: 'not_found' });
      }
      return reply
        .code(204)
        .header('access-control-allow-methods', 'GET, HEAD, POST, PUT, PATCH, DELETE')
        .header('access-control-allow-headers', 'authorization, content-type')
        .send();
    });
  }

  if (options.readOnly) {
    /** What a read-only service still answers: reads, and blocks/car, a read sent as a POST. */
    const blocksCar = `${API_PREFIX}/blocks/car`;
    app.addHook('onRequest', async (request) => {
      const { method } = request;
      const reads =
        method === 'GET' ||
        method === 'HEAD' ||
        (method === 'POST' && request.routeOptions.url === blocksCar);
      if (!reads) throw new ServiceError('conflict', READ_ONLY_MSG);
      return Promise.resolve();
    });
  } else {
    app.addHook('onRequest', async () => {
      // State read from the clock and state recorded must agree (§10.2). A read-only service
      // records nothing: retention would remove files from its disk.
      ctx.sweep();
      return Promise.resolve();
    });
  }

  function register(route: RouteSpec): void {
    app.route({
      method: route.method,
      url: `${API_PREFIX}${route.url}`,
      handler: async (request, reply) => {
        const base: RouteRequest = {
          raw: request.raw,
          params: request.params as Record<string, string>,
          query: request.query as Record<string, string | undefined>,
        };
        const now = ctx.now();
        const authorization = request.headers.authorization;
        let result: unknown;
        switch (route.auth) {
          case 'device': {
            const device = authenticateDevice(ctx.db, authorization, settings, now);
            ctx.noteSeen(device.keyId, now);
            rateLimited(ctx.credentialLimiter, `key:${device.keyId}`, now);
            result = await route.handler(ctx, { ...base, device }, reply);
            break;
          }
          case 'storage': {
            const storage = authenticateStorage(
              ctx.db,
              authorization,
              ctx.serviceKey,
              settings,
              now,
            );
            rateLimited(ctx.credentialLimiter, `sa:${storage.nonce}`, now);
            result = await route.handler(ctx, { ...base, storage }, reply);
            break;
          }
          case 'ip':
            rateLimited(ctx.ipLimiter, `ip:${request.ip}`, now);
            result = await route.handler(ctx, base, reply);
            break;
          default: {
            const unreachable: never = route;
            throw new Error(`unknown auth kind ${String(unreachable)}`);
          }
        }
        // A handler that answered itself returns its reply, which is thenable: awaited, it
        // gave what its `then` settles with, not itself.
        return reply.sent ? reply : reply.send(result);
      },
    });
  }
  for (const route of ROUTES) register(route);

  let sweepTimer: NodeJS.Timeout | undefined;
  /** Hands the connections it accepts to the HTTP server, as its own listening socket does. */
  let socketServer: Server | undefined;
  /** When the kept copy of the database was last made or tried, and what had changed then. */
  let lastCopyAt = options.clock();
  let changesAtCopy = 0;
  let copying: Promise<void> | undefined;
  /**
   * Copies the database for the day it is damaged, when this process changed it since the last
   * copy (store/kept-database-copy.ts). One at a time; a failure is logged, never thrown: the
   * service goes on, and the copy kept before stays.
   */
  const keepCopy = (): Promise<void> => {
    copying ??= (async () => {
      if (options.readOnly === true) return;
      const changes = ctx.changesWorthACopy();
      if (changes === changesAtCopy) return;
      lastCopyAt = options.clock();
      let retired: string[] = [];
      try {
        // Packs retired before this copy are named by no row it holds: they go once it is kept.
        retired = ctx.blocks.retiredPacks();
        if (await keepDatabaseCopy(ctx.db, options.dataDir)) {
          changesAtCopy = changes;
          ctx.blocks.dropRetired(retired);
        } else app.log.error('the database does not pass quick_check: the copy kept before stays');
      } catch (error) {
        app.log.error({ err: error }, 'could not keep a copy of the database');
        // A disk too full for the copy must not stay full for want of one: the copy kept
        // before then misses those packs' blocks, which devices send again when they find so.
        if (isOutOfSpace(error)) {
          try {
            ctx.blocks.dropRetired(retired);
          } catch (dropError) {
            app.log.error({ err: dropError }, 'could not delete retired packs');
          }
        }
      }
    })().finally(() => {
      copying = undefined;
    });
    return copying;
  };
  return {
    app,
    ctx,
    restoredDatabase,
    async listen(host, port) {
      const address = await app.listen({ host, port });
      const url = new URL(address);
      const base = `${url.protocol}//${host.includes(':') ? `[${host}]` : host}:${url.port}`;
      if (options.publicUrl === undefined) ctx.storageHost = base;
      if (options.readOnly) return base;
      sweepTimer = setInterval(() => {
        try {
          ctx.sweep();
          ctx.collectGarbage();
        } catch (error) {
          app.log.error({ err: error }, 'sweep failed');
        }
        ctx.compactPacks().catch((error: unknown) => {
          app.log.error({ err: error }, 'pack compaction failed');
        });
        ctx.compactChunkFiles().catch((error: unknown) => {
          app.log.error({ err: error }, 'compaction of metadata chunk files failed');
        });
        const releaseUntil = performance.now() + FREE_PAGES_RELEASE_MS;
        ctx.releaseFreePages(() => performance.now() < releaseUntil);
        if (options.clock() - lastCopyAt >= DATABASE_COPY_EVERY_MS) void keepCopy();
      }, options.sweepIntervalMs);
      sweepTimer.unref();
      return base;
    },
    async listenOnSocket(socketPath) {
      const server = createServer((socket) => app.server.emit('connection', socket));
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(socketPath, () => {
          server.off('error', reject);
          resolve();
        });
      });
      socketServer = server;
    },
    async close() {
      if (sweepTimer) clearInterval(sweepTimer);
      // No new connections on the socket; those it handed on close with the HTTP server's.
      const closingSocket = socketServer
        ? new Promise<void>((resolve) => socketServer?.close(() => resolve()))
        : Promise.resolve();
      // Idle connections close at once; an upload still streaming gets a short grace period.
      const force = setTimeout(() => app.server.closeAllConnections(), 2_000);
      try {
        await app.close();
        await closingSocket;
      } finally {
        clearTimeout(force);
        try {
          await ctx.settle();
          await keepCopy();
          ctx.close();
        } finally {
          serving?.lock.release();
        }
      }
    },
  };
}
