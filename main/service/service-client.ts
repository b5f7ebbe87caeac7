import { open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Dispatcher } from 'undici';
import { EngineError, throwIfStopped, unlessStopped } from '../api/index.ts';
import {
  API_PREFIX,
  DEFAULT_LIMITS,
  MEDIA_CAR,
  MEDIA_JSON,
  PART_CAR_UPLOAD,
  PART_REQUEST_DATA,
} from '../protocol/index.ts';
import type {
  Bucket,
  BucketCreateResult,
  BucketType,
  DeviceKey,
  EnrollResult,
  Invoice,
  Metadata,
  MetadataUploadResult,
  Notification,
  ShardUploadResult,
  Snapshot,
  StorageClass,
  User,
  WhoAmI,
} from '../protocol/index.ts';
import { checkServiceUrl } from './base-url.ts';
import { fileBody } from './file-body.ts';
import { pushBody } from './push-body.ts';
import { outgoingBody } from './outgoing-body.ts';
import type { TransferRateLimit } from './transfer-rate-limit.ts';
import { answerCut, errorFromResponse, networkError } from './http-errors.ts';
import { isRefusedRedirect, redirectedError } from './redirected-answer.ts';
import {
  isJsonType,
  isServiceErrorBody,
  noServiceAt,
  notTheService,
  refusalNotTheService,
} from './not-the-service.ts';
import { parse } from './response-shapes.ts';
import type { ServerClock } from './server-clock.ts';
import { socketDispatcher } from './socket-dispatcher.ts';
import { type SentAgain, watchSentAgain } from './sent-again.ts';
import { type AnswerBody, streamedRequest } from './streamed-answer.ts';
import {
  DEFAULT_RETRY_POLICY,
  parseRetryAfter,
  retryDelayMs,
  type RetryPolicy,
} from './retry-policy.ts';
import { OUTAGE_RETRY_MS, type ServiceOutage } from './service-outage.ts';

// A typed client for every endpoint of the Bucket Storage Service (bucket-service.md), over
// Node's fetch, and undici's request for blocks/car (streamed-answer.ts). Retries transient
// failures with backoff and full jitter; everything else fails at once with an EngineError.

export interface ServiceClientOptions {
  /** The service's base URL, e.g. https://backup.example.org (no /api/v1). */
  readonly baseUrl: string;
  /** Supplies a device JWT; absent before enrollment. */
  readonly deviceToken?: () => string;
  readonly retry?: RetryPolicy;
  readonly random?: () => number;
  readonly delay?: (ms: number) => Promise<void>;
  /** Called before each retry, for logs and progress. */
  readonly onRetry?: (info: { attempt: number; delayMs: number; error: EngineError }) => void;
  /**
   * The service's clock as best known, which every answer's `Date` header corrects; a request
   * refused (401) once it moved is signed again (server-clock.ts).
   */
  readonly serverClock?: ServerClock;
  /** A Unix socket that reaches the base URL's origin: the embedded service's own. */
  readonly socketPath?: string;
  /**
   * Stops every request: one in flight is cut off, a retry's wait ends, and the request fails
   * with `stopped` (api/stopped.ts).
   */
  readonly signal?: AbortSignal;
  /** Paces the bodies this client streams (shards, metadata CARs): `--limit-upload`. */
  readonly uploadLimit?: TransferRateLimit;
  /** Paces the answers this client streams (blocks, metadata CARs): `--limit-download`. */
  readonly downloadLimit?: TransferRateLimit;
  /** The operation's state against outages, past `retry`'s attempts (service-outage.ts). */
  readonly outage?: ServiceOutage;
}

/** What fetch accepts as a request body. */
type RequestBody = NonNullable<RequestInit['body']>;

type Auth = { kind: 'device' } | { kind: 'storage'; token: string } | { kind: 'none' };

/** One attempt's outcome: the successful answer, or a failed status and its body. */
type Attempt<T> =
  | { readonly ok: true; readonly value: T }
  | {
      readonly ok: false;
      readonly status: number;
      readonly text: string;
      readonly retryAfter: string | null;
      /** The Location header of a redirect (3xx). */
      readonly location: string | null;
      readonly contentType: string | null;
      /** Whether the answer's `Date` moved the service's clock as known (ServerClock.observe). */
      readonly clockMoved: boolean;
    };

/** A request's body as made for one attempt. */
interface MadeBody {
  readonly bytes: RequestBody;
  /** '' to leave the content type to fetch (a FormData's own, with its boundary). */
  readonly contentType: string;
  readonly length?: number;
  /** A streamed body's bytes of this attempt handed to the connection so far, after each chunk. */
  readonly onSent?: (sentThisAttempt: number) => void;
}

interface RequestSpec {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Absolute API root (service or storage host), then the path below /api/v1. */
  readonly root?: string;
  readonly path: string;
  readonly auth: Auth;
  readonly json?: unknown;
  /** A fresh body for each attempt, so retries resend it whole. */
  readonly body?: () => MadeBody;
  readonly expectStatus?: number;
  /**
   * Whether the request may be sent again after its answer broke off part-way, when the server
   * has carried it out already: by default every method but POST. A POST that only reads
   * (blocks/missing) says so here.
   */
  readonly repeatable?: boolean;
  /**
   * Runs before each attempt after the first, inside that attempt: undoes what an earlier
   * attempt whose answer was lost may have done on the server, so that sending it again is
   * harmless.
   */
  readonly beforeRetry?: () => Promise<void>;
}

export interface PushRequest {
  readonly bucketId: string;
  readonly rootCid: string;
  readonly metadataCid: string;
  readonly expectedDataSize: number;
  readonly previousId: string | null;
  readonly validKeys: readonly string[];
  readonly deletedBlockCids: readonly string[];
  /**
   * The metadata CAR: bytes, a Blob (a file's, from `openAsBlob`, is read as it is sent), or a
   * file read as it is sent, whose bytes sent are told (push-body.ts).
   */
  readonly car:
    | Uint8Array
    | Blob
    | {
        readonly file: string;
        readonly bytes: number;
        /** Bytes of the CAR handed to the connection so far; a retry starts again at 0. */
        readonly onSent?: (sentThisAttempt: number) => void;
      };
}

/**
 * Waits `ms`; once `signal` fires, for ever, its timer gone: the stop is told by unlessStopped.
 * A timer left running held a stopped command's process until it ran out: `canopy backup`
 * stopped while the service was down exited some 4 s after it said it had stopped.
 */
function retryWait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    sleep(ms, undefined, signal ? { signal } : {}).then(resolve, () => undefined);
  });
}

/**
 * A failure of a read callback's own (writing an answer to a file), not of the answer: it
 * passes through sendAndRead and its retries as `failure` itself, neither a network error nor
 * tried again (a full disk stays full).
 */
class OwnFailure extends Error {
  constructor(readonly failure: unknown) {
    super('the answer could not be kept', { cause: failure });
  }
}

/** Runs `step`, its failure an OwnFailure. */
async function own<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    throw new OwnFailure(error);
  }
}

export class ServiceClient {
  readonly baseUrl: string;
  private readonly options: ServiceClientOptions;
  private readonly retry: RetryPolicy;
  /** Through `socketPath`, when given; else undici's global dispatcher. */
  private readonly dispatcher: Dispatcher | undefined;

  /**
   * `sharedDispatcher`: connections to `socketPath` that other clients use too (its owner
   * closes them); by default this client opens its own.
   */
  constructor(options: ServiceClientOptions, sharedDispatcher?: Dispatcher) {
    this.baseUrl = checkServiceUrl(options.baseUrl);
    this.options = options;
    this.retry = options.retry ?? DEFAULT_RETRY_POLICY;
    this.dispatcher =
      sharedDispatcher ??
      (options.socketPath === undefined
        ? undefined
        : socketDispatcher(this.baseUrl, options.socketPath));
  }

  /**
   * This client's requests, stopped when `signal` fires, or a signal that stopped them already
   * does; over this client's connections.
   */
  stoppedBy(signal: AbortSignal): ServiceClient {
    const before = this.options.signal;
    return new ServiceClient(
      { ...this.options, signal: before ? AbortSignal.any([before, signal]) : signal },
      this.dispatcher,
    );
  }

  /** How many times a request is tried before it fails (but for an outage ridden out). */
  get attemptsPerRequest(): number {
    return this.retry.attempts;
  }

  /**
   * This client's requests, tried on through an outage of the service (service-outage.ts) as
   * `outage` allows, once the operation it stands for has reached the service.
   */
  ridingOutOutages(outage: ServiceOutage): ServiceClient {
    return new ServiceClient({ ...this.options, outage }, this.dispatcher);
  }

  /**
   * This client's requests, each tried once, not ridden through an outage: for what is worth
   * only a quick answer (the notices shown after a backup, which the next backup asks again).
   */
  triedOnce(): ServiceClient {
    const { options } = this.notRidingOutOutages();
    return new ServiceClient(
      { ...options, retry: { ...this.retry, attempts: 1 } },
      this.dispatcher,
    );
  }

  /**
   * This client's requests, given up past the retry policy's attempts however ridingOutOutages
   * made it: for what follows an operation's work (a backup's sample check, once it is stored).
   */
  notRidingOutOutages(): ServiceClient {
    const { outage, ...options } = this.options;
    return outage ? new ServiceClient(options, this.dispatcher) : this;
  }

  /**
   * This client's requests, their streamed bodies sent no faster than `upload` allows, and
   * their streamed answers taken no faster than `download` allows.
   */
  pacedBy(limits: {
    readonly upload?: TransferRateLimit;
    readonly download?: TransferRateLimit;
  }): ServiceClient {
    return new ServiceClient(
      {
        ...this.options,
        ...(limits.upload ? { uploadLimit: limits.upload } : {}),
        ...(limits.download ? { downloadLimit: limits.download } : {}),
      },
      this.dispatcher,
    );
  }

  private authorization(auth: Auth): string | undefined {
    switch (auth.kind) {
      case 'device': {
        const token = this.options.deviceToken?.();
        if (token === undefined)
          throw new EngineError('not_logged_in', 'this device is not enrolled yet');
        return `Bearer ${token}`;
      }
      case 'storage':
        return `Bearer ${auth.token}`;
      case 'none':
        return undefined;
      default: {
        const unreachable: never = auth;
        return unreachable;
      }
    }
  }

  /** The request's headers and body, made afresh for each attempt (a token expires). */
  private prepare(spec: RequestSpec): {
    headers: Record<string, string>;
    body?: RequestBody;
    onSent?: (sentThisAttempt: number) => void;
  } {
    const headers: Record<string, string> = {};
    const authorization = this.authorization(spec.auth);
    if (authorization !== undefined) headers['authorization'] = authorization;
    if (spec.json !== undefined) {
      headers['content-type'] = MEDIA_JSON;
      return { headers, body: JSON.stringify(spec.json) };
    }
    if (spec.body) {
      const made = spec.body();
      if (made.contentType !== '') headers['content-type'] = made.contentType;
      if (made.length !== undefined) headers['content-length'] = String(made.length);
      const { uploadLimit } = this.options;
      return {
        headers,
        body:
          uploadLimit && made.bytes instanceof ReadableStream
            ? uploadLimit.paced(made.bytes as ReadableStream<Uint8Array>)
            : made.bytes,
        ...(made.onSent ? { onSent: made.onSent } : {}),
      };
    }
    return { headers };
  }

  /**
   * Runs `attempt` under the retry policy: a retryable status or a network failure is tried
   * again after a delay, anything else fails at once; the last error once the budget is spent.
   */
  private async withRetries<T>(
    url: string,
    spec: RequestSpec,
    attempt: () => Promise<Attempt<T>>,
  ): Promise<T> {
    const { signal, outage } = this.options;
    let signedAgain = false;
    /** When this request first failed, for `outage`'s budget. */
    let firstFailureAt: number | undefined;
    for (let count = 1; ; count += 1) {
      throwIfStopped(signal);
      let error: EngineError;
      let retryAfter: number | undefined;
      try {
        const outcome = await attempt();
        if (outcome.ok) {
          outage?.succeeded();
          return outcome.value;
        }
        if (outcome.status >= 300 && outcome.status < 400)
          throw redirectedError({
            url,
            apiPath: `${API_PREFIX}${spec.path}`,
            enrolled: spec.auth.kind !== 'none',
            status: outcome.status,
            location: outcome.location,
          });
        let parsed: { msg?: unknown; code?: unknown } | undefined;
        try {
          parsed = JSON.parse(outcome.text) as { msg?: unknown; code?: unknown };
        } catch {
          parsed = undefined;
        }
        if (!isServiceErrorBody(parsed) && refusalNotTheService(outcome.status))
          throw notTheService(url, outcome.status, outcome.contentType, outcome.text);
        error = errorFromResponse(outcome.status, parsed);
        // Refused for a token this device's wrong clock dated: signed again by the service's
        // time, at once and once (a refused request did nothing on the server).
        if (outcome.status === 401 && outcome.clockMoved && !signedAgain) {
          signedAgain = true;
          count -= 1;
          continue;
        }
        retryAfter = outcome.status === 429 ? parseRetryAfter(outcome.retryAfter) : undefined;
        if (!error.retryable) throw error;
      } catch (caught) {
        // However the cut-off request failed (an AbortError, a broken body), it was stopped.
        throwIfStopped(signal);
        if (caught instanceof OwnFailure) throw caught.failure;
        if (caught instanceof EngineError && !caught.retryable) throw caught;
        // fetch wraps a failure of the body's own stream (a source file that changed) in a
        // TypeError; that failure is the body's verdict, and resending would not change it.
        if (
          caught instanceof TypeError &&
          caught.cause instanceof EngineError &&
          !caught.cause.retryable
        )
          throw caught.cause;
        error = caught instanceof EngineError ? caught : networkError(url, caught);
        // A server whose certificate is not trusted, or a proxy that refuses the way to it,
        // stays so however often it is asked.
        if (!error.retryable) throw error;
      }
      firstFailureAt ??= outage?.now() ?? 0;
      if (count >= this.retry.attempts && outage?.mayWait(error, firstFailureAt) !== true)
        throw error;
      // Past the policy's attempts, riding out an outage: tried every few seconds, so that an
      // operation goes on soon after the service is back, rather than up to maxDelayMs later.
      const policy =
        count >= this.retry.attempts
          ? { ...this.retry, maxDelayMs: Math.min(this.retry.maxDelayMs, OUTAGE_RETRY_MS) }
          : this.retry;
      const delayMs = retryDelayMs(policy, count, retryAfter, this.options.random ?? Math.random);
      this.options.onRetry?.({ attempt: count, delayMs, error });
      await unlessStopped(
        (this.options.delay ?? ((ms: number) => retryWait(ms, signal)))(delayMs),
        signal,
      );
    }
  }

  private urlOf(spec: RequestSpec): string {
    const root = spec.root === undefined ? this.baseUrl : checkServiceUrl(spec.root);
    return `${root}${API_PREFIX}${spec.path}`;
  }

  /**
   * One attempt over fetch: the Response once its status and headers are in, and `end`, to call
   * once its answer is read (or will not be), which ends its streamed body.
   */
  private async fetchOnce(
    url: string,
    spec: RequestSpec,
  ): Promise<{ response: Response; end: () => void }> {
    const { headers, body: made, onSent } = this.prepare(spec);
    // A streamed body is counted as it leaves, and ends with its request, answered, failed or
    // stopped (outgoing-body.ts).
    const requestEnded = made instanceof ReadableStream ? new AbortController() : undefined;
    const body =
      requestEnded && made instanceof ReadableStream
        ? outgoingBody(made as ReadableStream<Uint8Array>, requestEnded.signal, onSent)
        : made;
    // A streamed body needs half-duplex mode in Node's fetch.
    const init = {
      method: spec.method,
      headers,
      ...(body === undefined ? {} : { body }),
      // A redirect is told, not followed (redirected-answer.ts). A streamed body (a shard, a
      // push's metadata CAR) is sent with 'error': in any other mode Node's fetch tees it to
      // keep a copy for a redirect, and the copy, never read, held every byte sent until the
      // answer came (46 MB of a push's 47 MB CAR, in a heap snapshot halfway through it).
      ...(body instanceof ReadableStream
        ? { duplex: 'half', redirect: 'error' }
        : { redirect: 'manual' }),
      // Node's fetch takes an undici dispatcher (its own extension of RequestInit).
      ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
      ...(this.options.signal ? { signal: this.options.signal } : {}),
    };
    const end = (): void => requestEnded?.abort(new Error('the request ended'));
    try {
      // The dispatcher is the undici package's, typed apart from the copy Node's typings carry.
      return { response: await fetch(url, init as unknown as RequestInit), end };
    } catch (error) {
      end();
      if (requestEnded && isRefusedRedirect(error))
        throw redirectedError({
          url,
          apiPath: `${API_PREFIX}${spec.path}`,
          enrolled: spec.auth.kind !== 'none',
          status: null,
          location: null,
        });
      throw error;
    }
  }

  /** Corrects the service's clock as known by an answer's `Date`; whether it moved. */
  private observeClock(dateHeader: string | null): boolean {
    return this.options.serverClock?.observe(dateHeader) ?? false;
  }

  /** The service's time now, as best known (ServerClock); this device's own without one. */
  serverNow(): number {
    return this.options.serverClock?.now() ?? Date.now();
  }

  /** A failed answer's outcome, for withRetries. */
  private async failed<T>(response: Response): Promise<Attempt<T>> {
    return {
      ok: false,
      status: response.status,
      text: await response.text(),
      retryAfter: response.headers.get('retry-after'),
      location: response.headers.get('location'),
      contentType: response.headers.get('content-type'),
      clockMoved: this.observeClock(response.headers.get('date')),
    };
  }

  /**
   * One request with the retry policy, over fetch, whose successful answer is read whole within
   * the attempt: an answer that breaks off part-way is a network failure, tried again when the
   * request is repeatable, and final otherwise (the server carried it out).
   */
  private sendAndRead<T>(spec: RequestSpec, read: (response: Response) => Promise<T>): Promise<T> {
    const url = this.urlOf(spec);
    const repeatable = spec.repeatable ?? spec.method !== 'POST';
    let attempted = false;
    return this.withRetries(url, spec, async () => {
      if (attempted) await spec.beforeRetry?.();
      attempted = true;
      const { response, end } = await this.fetchOnce(url, spec);
      // Not before the answer is read: a body ended while the server answers (early, as to a
      // shard refused before it is all sent) cuts the answer off too.
      try {
        if (!response.ok) return await this.failed<T>(response);
        this.observeClock(response.headers.get('date'));
        try {
          return { ok: true, value: await read(response) };
        } catch (error) {
          if (error instanceof OwnFailure) throw error;
          throw answerCut(url, error, repeatable);
        }
      } finally {
        end();
      }
    });
  }

  /** sendAndRead for an answer's bytes. */
  private async bytes(spec: RequestSpec): Promise<Uint8Array> {
    return new Uint8Array(await this.sendAndRead(spec, (response) => response.arrayBuffer()));
  }

  /**
   * One request with the retry policy, over undici (streamed-answer.ts); resolves to the
   * successful answer's body as it arrives. For JSON requests with a long binary answer.
   */
  private stream(spec: RequestSpec): Promise<AnswerBody> {
    if (spec.body !== undefined) throw new Error('a streamed answer takes a JSON request or none');
    const url = this.urlOf(spec);
    return this.withRetries(url, spec, async () => {
      const { headers, body } = this.prepare(spec);
      const answer = await streamedRequest({
        method: spec.method,
        url,
        headers,
        ...(typeof body === 'string' ? { body } : {}),
        ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
        ...(this.options.signal ? { signal: this.options.signal } : {}),
      });
      const clockMoved = this.observeClock(answer.header('date'));
      if (answer.status >= 200 && answer.status < 300)
        return { ok: true, value: this.pacedAnswer(answer.body) };
      return {
        ok: false,
        status: answer.status,
        text: await answer.text(),
        retryAfter: answer.header('retry-after'),
        location: answer.header('location'),
        contentType: answer.header('content-type'),
        clockMoved,
      };
    });
  }

  /** A streamed answer, taken no faster than the download limit allows, when there is one. */
  private pacedAnswer(body: AnswerBody): AnswerBody {
    const limit = this.options.downloadLimit;
    if (!limit) return body;
    const pieces = limit.pacedChunks(body, this.options.signal);
    return { [Symbol.asyncIterator]: () => pieces, cancel: () => body.cancel() };
  }

  private async json<T>(spec: RequestSpec, check: (value: unknown) => T): Promise<T> {
    const url = this.urlOf(spec);
    const answer = await this.sendAndRead(spec, async (response) => ({
      status: response.status,
      contentType: response.headers.get('content-type'),
      text: await response.text(),
    }));
    let value: unknown;
    try {
      value = JSON.parse(answer.text);
    } catch (error) {
      // Not JSON, nor said to be: another web server's answer (a web app's page).
      if (!isJsonType(answer.contentType))
        throw notTheService(url, answer.status, answer.contentType, answer.text);
      throw new EngineError('protocol', 'the server sent a body that is not JSON', {
        cause: error,
      });
    }
    return check(value);
  }

  private async empty(spec: RequestSpec): Promise<void> {
    await this.bytes(spec);
  }

  /**
   * A DELETE, done also when sent again it finds what it deletes gone: the attempt before may
   * have deleted it and lost its answer (a connection that broke before the 204 came). Gone
   * meanwhile by another device's hand, it is gone all the same, as the caller asked. A DELETE
   * of the key that signs it (`ownKey`) finds it gone as a 401: the key signing it again no
   * longer counts.
   */
  private async deleted(
    spec: RequestSpec & { method: 'DELETE' },
    options: { ownKey?: boolean } = {},
  ): Promise<void> {
    const sentAgain = watchSentAgain();
    try {
      await this.empty({ ...spec, beforeRetry: sentAgain.beforeRetry });
    } catch (error) {
      const gone =
        error instanceof EngineError &&
        (error.code === 'not_found' ||
          (options.ownKey === true && error.code === 'not_authorized'));
      if (!(sentAgain.happened() && gone)) throw error;
    }
  }

  // §8 enrollment and device keys

  /** `request`, a route every Canopy server has: its 404 means none answers at this address. */
  private async ofEveryServer<T>(request: Promise<T>): Promise<T> {
    try {
      return await request;
    } catch (error) {
      if (error instanceof EngineError && error.code === 'not_found')
        throw noServiceAt(this.baseUrl, error);
      throw error;
    }
  }

  /**
   * Enrolls a device key with a code (§8.1). `sentAgain` watches whether the request was sent
   * again after a retryable failure: some of those failures (a connection that broke before the
   * answer came) may have reached the server, and a 401 to a request sent again may then be the
   * code used by the one before.
   */
  enroll(
    input: { code: string; pem: string; deviceName?: string },
    sentAgain: SentAgain = watchSentAgain(),
  ): Promise<EnrollResult> {
    const json = {
      code: input.code,
      pem: input.pem,
      ...(input.deviceName === undefined ? {} : { device_name: input.deviceName }),
    };
    return this.ofEveryServer(
      this.json(
        {
          method: 'POST',
          path: '/auth/enroll',
          auth: { kind: 'none' },
          json,
          beforeRetry: sentAgain.beforeRetry,
        },
        parse.enrollResult,
      ),
    );
  }

  createEnrollmentCode(): Promise<{ code: string; expires_at: number }> {
    return this.json(
      { method: 'POST', path: '/auth/enrollment_codes', auth: { kind: 'device' } },
      parse.enrollmentCode,
    );
  }

  listDeviceKeys(): Promise<DeviceKey[]> {
    return this.json(
      { method: 'GET', path: '/auth/device_api_key', auth: { kind: 'device' } },
      parse.deviceKeys,
    );
  }

  addDeviceKey(input: {
    pem: string;
    name?: string;
  }): Promise<{ id: string; fingerprint: string }> {
    const json = { pem: input.pem, ...(input.name === undefined ? {} : { name: input.name }) };
    return this.json(
      { method: 'POST', path: '/auth/device_api_key', auth: { kind: 'device' }, json },
      parse.addedKey,
    );
  }

  getDeviceKey(id: string): Promise<DeviceKey> {
    return this.json(
      {
        method: 'GET',
        path: `/auth/device_api_key/${encodeURIComponent(id)}`,
        auth: { kind: 'device' },
      },
      parse.deviceKey,
    );
  }

  /** Revokes a device key; `ownKey` when it is the one this client signs with. */
  deleteDeviceKey(id: string, options: { ownKey?: boolean } = {}): Promise<void> {
    return this.deleted(
      {
        method: 'DELETE',
        path: `/auth/device_api_key/${encodeURIComponent(id)}`,
        auth: { kind: 'device' },
      },
      options,
    );
  }

  /** One regwait poll: the user id once the key is registered, null when the hold ran out. */
  async pollRegistration(fingerprint: string): Promise<string | null> {
    try {
      const answer = await this.ofEveryServer(
        this.json(
          {
            method: 'GET',
            path: `/auth/device_api_key/start_regwait/${encodeURIComponent(fingerprint)}`,
            auth: { kind: 'none' },
          },
          parse.regwait,
        ),
      );
      return answer.user_id;
    } catch (error) {
      if (error instanceof EngineError && error.code === 'timeout') return null;
      throw error;
    }
  }

  whoAmI(): Promise<WhoAmI> {
    return this.json(
      { method: 'GET', path: '/auth/who_am_i', auth: { kind: 'device' } },
      parse.whoAmI,
    );
  }

  // §9 buckets and §12 snapshots

  listBuckets(): Promise<Bucket[]> {
    return this.json({ method: 'GET', path: '/buckets', auth: { kind: 'device' } }, parse.buckets);
  }

  createBucket(input: {
    name: string;
    type: BucketType;
    storageClass: StorageClass;
    bucketKeyPem: string;
  }): Promise<BucketCreateResult> {
    const json = {
      name: input.name,
      type: input.type,
      storage_class: input.storageClass,
      initial_bucket_key_pem: input.bucketKeyPem,
    };
    return this.json(
      { method: 'POST', path: '/buckets', auth: { kind: 'device' }, json },
      parse.bucketCreated,
    );
  }

  getBucket(id: string): Promise<Bucket> {
    return this.json(
      { method: 'GET', path: `/buckets/${encodeURIComponent(id)}`, auth: { kind: 'device' } },
      parse.bucket,
    );
  }

  updateBucket(id: string, update: { name?: string; replicas?: number }): Promise<void> {
    return this.empty({
      method: 'PUT',
      path: `/buckets/${encodeURIComponent(id)}`,
      auth: { kind: 'device' },
      json: update,
    });
  }

  deleteBucket(id: string): Promise<void> {
    return this.deleted({
      method: 'DELETE',
      path: `/buckets/${encodeURIComponent(id)}`,
      auth: { kind: 'device' },
    });
  }

  listSnapshots(bucketId: string): Promise<Snapshot[]> {
    return this.json(
      {
        method: 'GET',
        path: `/buckets/${encodeURIComponent(bucketId)}/snapshots`,
        auth: { kind: 'device' },
      },
      parse.snapshots,
    );
  }

  getSnapshot(bucketId: string, id: string): Promise<Snapshot> {
    return this.json(
      {
        method: 'GET',
        path: `/buckets/${encodeURIComponent(bucketId)}/snapshots/${encodeURIComponent(id)}`,
        auth: { kind: 'device' },
      },
      parse.snapshot,
    );
  }

  deleteSnapshot(bucketId: string, id: string): Promise<void> {
    return this.deleted({
      method: 'DELETE',
      path: `/buckets/${encodeURIComponent(bucketId)}/snapshots/${encodeURIComponent(id)}`,
      auth: { kind: 'device' },
    });
  }

  // §10 versions

  listVersions(bucketId?: string): Promise<Metadata[]> {
    const query = bucketId === undefined ? '' : `?bucket_id=${encodeURIComponent(bucketId)}`;
    return this.json(
      { method: 'GET', path: `/buckets/metadata${query}`, auth: { kind: 'device' } },
      parse.metadataList,
    );
  }

  pushVersion(input: PushRequest): Promise<MetadataUploadResult> {
    const requestData = {
      bucket_id: input.bucketId,
      root_cid: input.rootCid,
      metadata_cid: input.metadataCid,
      expected_data_size: input.expectedDataSize,
      previous_id: input.previousId,
      valid_keys: input.validKeys,
      deleted_block_cids: input.deletedBlockCids,
    };
    const body = (): MadeBody => {
      if (!(input.car instanceof Uint8Array || input.car instanceof Blob)) {
        const { car } = input;
        const made = pushBody(JSON.stringify(requestData), car);
        const { onSent } = car;
        return {
          bytes: made.stream,
          contentType: made.contentType,
          length: made.length,
          // The CAR's bytes among the multipart body's.
          ...(onSent
            ? {
                onSent: (sent: number) =>
                  onSent(Math.min(car.bytes, Math.max(0, sent - made.carStart))),
              }
            : {}),
        };
      }
      const form = new FormData();
      form.append(PART_REQUEST_DATA, new Blob([JSON.stringify(requestData)], { type: MEDIA_JSON }));
      const car = input.car instanceof Blob ? input.car : new Blob([input.car]);
      // A Blob made of a Blob refers to its bytes, without a copy.
      form.append(
        PART_CAR_UPLOAD,
        car.type === MEDIA_CAR ? car : new Blob([car], { type: MEDIA_CAR }),
      );
      // fetch writes the multipart body and its boundary itself.
      return { bytes: form, contentType: '' };
    };
    return this.json(
      {
        method: 'POST',
        path: '/buckets/metadata',
        auth: { kind: 'device' },
        body,
        // Several pending versions may coexist (§10.1), so a push whose answer was lost can be
        // sent again, once the version it may have made is deleted: left pending, that version
        // would hold its expected size against the quota until its window ends (§11.6).
        repeatable: true,
        beforeRetry: () => this.deleteLostPushes(input),
      },
      parse.uploadResult,
    );
  }

  /**
   * The version an earlier attempt of `push` made and activated at once (a push of no data,
   * §10.1), when its answer was lost: the attempt sent again was then refused as stale
   * (409 stale_previous), since the version it builds on is active no more. Undefined when no
   * attempt did, or another version was activated since. The metadata CID tells it apart, as
   * for deleteLostPushes.
   */
  async activatedPush(
    push: Pick<PushRequest, 'bucketId' | 'metadataCid' | 'previousId'>,
  ): Promise<string | undefined> {
    return (await this.listVersions(push.bucketId)).find(
      (version) =>
        version.state === 'active' &&
        version.metadata_cid === push.metadataCid &&
        version.previous_id === push.previousId,
    )?.id;
  }

  /**
   * Deletes the pending versions that earlier attempts of `push` made. The metadata CID tells
   * them apart: the manifest names the device and the second it was packed in (§17.3), so no
   * other push, by this device or another, has the same one.
   */
  private async deleteLostPushes(push: PushRequest): Promise<void> {
    const lost = (await this.listVersions(push.bucketId)).filter(
      (version) =>
        version.state === 'pending' &&
        version.metadata_cid === push.metadataCid &&
        version.previous_id === push.previousId,
    );
    for (const version of lost) await this.discardVersion(version.id);
  }

  getVersion(id: string): Promise<Metadata> {
    return this.json(
      {
        method: 'GET',
        path: `/buckets/metadata/${encodeURIComponent(id)}`,
        auth: { kind: 'device' },
      },
      parse.metadata,
    );
  }

  deleteVersion(id: string): Promise<void> {
    return this.deleted({
      method: 'DELETE',
      path: `/buckets/metadata/${encodeURIComponent(id)}`,
      auth: { kind: 'device' },
    });
  }

  /**
   * Deletes a version this client made and no longer wants; one already gone is fine, also
   * before the first request (deleted() takes it as done only after one sent again found it
   * gone): a user deleting a version by hand that is not there is told so.
   */
  async discardVersion(id: string): Promise<void> {
    try {
      await this.deleteVersion(id);
    } catch (error) {
      if (!(error instanceof EngineError && error.code === 'not_found')) throw error;
    }
  }

  pullVersion(id: string): Promise<Uint8Array> {
    return this.bytes({
      method: 'GET',
      path: `/buckets/metadata/${encodeURIComponent(id)}/pull`,
      auth: { kind: 'device' },
    });
  }

  /**
   * pullVersion, written to `file` (created, or emptied, with mode 0600) as it arrives rather
   * than held: a tree of 400 000 files has a metadata CAR of about 60 MB. An answer that breaks
   * off is asked for again from its start; a failed write (a full disk) is final, and its own
   * error. So is an answer of more than `maxBytes`, the most a backup makes (§14): a faulty or
   * hostile service could otherwise fill the disk it is written to.
   */
  async pullVersionToFile(
    id: string,
    file: string,
    /**
     * Bytes of this attempt written so far, and the CAR's size as the answer states it (null
     * when it does not); a retry starts again at 0.
     */
    onReceived?: (receivedThisAttempt: number, total: number | null) => void,
    maxBytes: number = DEFAULT_LIMITS.metadataCarBytes,
  ): Promise<void> {
    const tooLarge = (): OwnFailure =>
      new OwnFailure(
        new EngineError(
          'payload_too_large',
          `the service sent more than ${maxBytes} bytes of metadata for version ${id}, more than any backup makes: the service is faulty, or the version was not made by Canopy; nothing of it was kept`,
        ),
      );
    await this.sendAndRead(
      {
        method: 'GET',
        path: `/buckets/metadata/${encodeURIComponent(id)}/pull`,
        auth: { kind: 'device' },
      },
      async (response) => {
        const handle = await own(() => open(file, 'w', 0o600));
        const stated = Number(response.headers.get('content-length') ?? Number.NaN);
        const total = Number.isSafeInteger(stated) && stated >= 0 ? stated : null;
        let received = 0;
        // The caller's own failure, as a write's is: not the answer breaking off.
        const told = (): Promise<void> => own(() => Promise.resolve(onReceived?.(received, total)));
        try {
          if (total !== null && total > maxBytes) throw tooLarge();
          await told();
          const { downloadLimit } = this.options;
          if (response.body)
            for await (const chunk of downloadLimit
              ? downloadLimit.pacedChunks(
                  response.body as ReadableStream<Uint8Array>,
                  this.options.signal,
                )
              : (response.body as ReadableStream<Uint8Array>)) {
              if (received + chunk.length > maxBytes) throw tooLarge();
              await own(() => handle.write(chunk));
              received += chunk.length;
              await told();
            }
        } finally {
          await own(() => handle.close());
        }
      },
    );
  }

  snapshotVersion(id: string): Promise<Snapshot> {
    return this.json(
      {
        method: 'POST',
        path: `/buckets/metadata/${encodeURIComponent(id)}/snapshot`,
        auth: { kind: 'device' },
      },
      parse.snapshot,
    );
  }

  // §11 storage host

  /**
   * Uploads a shard, given as bytes or as a staged file that is streamed from disk (never held
   * in memory); each retry reopens the file.
   */
  uploadShard(
    storageHost: string,
    sa: string,
    versionId: string,
    shardCid: string,
    car:
      | Uint8Array
      | {
          readonly file: string;
          readonly bytes: number;
          /** Bytes of this attempt handed to the connection so far; a retry starts again at 0. */
          readonly onSent?: (sentThisAttempt: number) => void;
        }
      | {
          /** A fresh stream of the shard's bytes for each attempt. */
          readonly stream: () => ReadableStream<Uint8Array>;
          readonly bytes: number;
          /** Bytes of this attempt handed to the connection so far; a retry starts again at 0. */
          readonly onSent?: (sentThisAttempt: number) => void;
        },
  ): Promise<ShardUploadResult> {
    const body = (): MadeBody => {
      if (car instanceof Uint8Array) return { bytes: car, contentType: MEDIA_CAR };
      return {
        bytes: 'stream' in car ? car.stream() : fileBody(car.file),
        contentType: MEDIA_CAR,
        length: car.bytes,
        ...(car.onSent ? { onSent: car.onSent } : {}),
      };
    };
    return this.json(
      {
        method: 'PUT',
        root: storageHost,
        path: `/upload/${encodeURIComponent(versionId)}/${encodeURIComponent(shardCid)}`,
        auth: { kind: 'storage', token: sa },
        body,
      },
      parse.shardResult,
    );
  }

  completeVersion(storageHost: string, sa: string, versionId: string): Promise<Metadata> {
    return this.json(
      {
        method: 'POST',
        root: storageHost,
        path: `/upload/${encodeURIComponent(versionId)}/complete`,
        auth: { kind: 'storage', token: sa },
        // Completing a version that is already active answers with its record (§11.4).
        repeatable: true,
      },
      parse.metadata,
    );
  }

  missingBlocks(storageHost: string, sa: string, cids: readonly string[]): Promise<string[]> {
    return this.json(
      {
        method: 'POST',
        root: storageHost,
        path: '/blocks/missing',
        auth: { kind: 'storage', token: sa },
        json: cids,
        repeatable: true,
      },
      parse.cidList,
    );
  }

  getBlock(storageHost: string, cid: string): Promise<Uint8Array> {
    return this.bytes({
      method: 'GET',
      root: storageHost,
      path: `/blocks/${encodeURIComponent(cid)}`,
      auth: { kind: 'device' },
    });
  }

  /** Streams a CAR of the requested blocks; the caller verifies every block (§16.9). */
  async blocksCar(storageHost: string, cids: readonly string[]): Promise<AnswerBody> {
    return this.stream({
      method: 'POST',
      root: storageHost,
      path: '/blocks/car',
      auth: { kind: 'device' },
      json: cids,
    });
  }

  // §13 account

  getUser(): Promise<User> {
    return this.json(
      { method: 'GET', path: '/users/current', auth: { kind: 'device' } },
      parse.user,
    );
  }

  updateUser(
    fields: Partial<
      Pick<
        User,
        'display_name' | 'locale' | 'profile_image' | 'accepted_tos_at' | 'account_tax_class'
      >
    >,
  ): Promise<void> {
    return this.empty({
      method: 'PATCH',
      path: '/users/current',
      auth: { kind: 'device' },
      json: fields,
    });
  }

  listInvoices(): Promise<Invoice[]> {
    return this.json(
      { method: 'GET', path: '/invoices', auth: { kind: 'device' } },
      parse.invoices,
    );
  }

  getInvoice(id: string): Promise<Invoice> {
    return this.json(
      { method: 'GET', path: `/invoices/${encodeURIComponent(id)}`, auth: { kind: 'device' } },
      parse.invoice,
    );
  }

  listNotifications(): Promise<Notification[]> {
    return this.json(
      { method: 'GET', path: '/notifications', auth: { kind: 'device' } },
      parse.notifications,
    );
  }

  dismissNotification(id: string): Promise<void> {
    return this.deleted({
      method: 'DELETE',
      path: `/notifications/${encodeURIComponent(id)}`,
      auth: { kind: 'device' },
    });
  }
}
