import { proxyRefusalAdvice, proxyRefusalOf } from './proxy-refusal.ts';
import { certificateAdvice, certificateProblemOf } from './untrusted-certificate.ts';
import { EngineError, type EngineErrorCode } from '../api/index.ts';
import {
  DAMAGED_DATABASE_MSG,
  DATA_FILE_MISSING_MSG,
  DISK_FAILED_MSG,
  OUT_OF_SPACE_MSG,
  READ_ONLY_MSG,
} from '../protocol/index.ts';

// The one place HTTP failures become EngineErrors (ARCHITECTURE.md). Statuses that a retry can
// fix (429, 500, 502, 503, 504) are marked retryable; every other status is final (§6).

const RETRYABLE_STATUSES = new Set([429, 500, 502, 503, 504]);

/**
 * What this project's service says when its disk or data needs its operator: no try of the
 * device's mends it, and the server's log names why (server/problem-log.ts).
 */
const OPERATOR_MSGS: ReadonlySet<string> = new Set([
  OUT_OF_SPACE_MSG,
  DAMAGED_DATABASE_MSG,
  DISK_FAILED_MSG,
  DATA_FILE_MISSING_MSG,
]);

export function isRetryableStatus(status: number): boolean {
  return RETRYABLE_STATUSES.has(status);
}

/**
 * The refusing answer behind an EngineError made here, as its `cause`: its status, and the
 * service's own error code (§6), '' when the body was not the service's (a proxy's page).
 */
export class ServiceAnswer extends Error {
  constructor(
    readonly status: number,
    readonly serviceCode: string,
    /** The service's own words (its `msg`); empty when it gave none. */
    readonly msg: string,
  ) {
    super(`HTTP ${status}${serviceCode === '' ? '' : ` ${serviceCode}`}: ${msg}`);
    this.name = 'ServiceAnswer';
  }
}

/** The service's own words (its `msg`) in the answer `error` came from; undefined for others. */
export function serviceMsgOf(error: unknown): string | undefined {
  return error instanceof EngineError && error.cause instanceof ServiceAnswer
    ? error.cause.msg
    : undefined;
}

/** Whether `error` is the service's own refusal with `serviceCode`, not a proxy's. */
export function isServiceRefusal(error: unknown, serviceCode: string): boolean {
  return error instanceof EngineError && error.cause instanceof ServiceAnswer
    ? error.cause.serviceCode === serviceCode
    : false;
}

export function errorFromResponse(
  status: number,
  body: { msg?: unknown; code?: unknown } | undefined,
): EngineError {
  const serverCode = typeof body?.code === 'string' ? body.code : '';
  const serverMsg = typeof body?.msg === 'string' ? body.msg : `HTTP ${status}`;
  let code: EngineErrorCode;
  let message: string;
  switch (status) {
    case 400:
      code = 'invalid_request';
      message = `the server refused the request: ${serverMsg}`;
      break;
    case 401:
      code = 'not_authorized';
      // A revoked key stays revoked: what gets the device going again is a new enrollment.
      message =
        'the server did not accept this device (the key may have been revoked); `canopy logout`, then `canopy login` or `canopy link`, enrolls it again, with its backups where they are';
      break;
    case 404:
      code = 'not_found';
      message = 'not found on the server';
      break;
    case 408:
      code = 'timeout';
      message = 'the server stopped waiting';
      break;
    case 409:
      if (serverMsg === READ_ONLY_MSG) {
        // This project's service, on a disk mounted read-only: not a conflict of records.
        code = 'read_only';
        message = READ_ONLY_MSG;
        break;
      }
      code = serverCode === 'stale_previous' ? 'stale_previous' : 'conflict';
      message =
        serverCode === 'stale_previous'
          ? 'another version was stored first'
          : `conflict: ${serverMsg}`;
      break;
    case 413:
      code = serverCode === 'quota_exceeded' ? 'quota_exceeded' : 'payload_too_large';
      message =
        serverCode === 'quota_exceeded'
          ? 'your storage quota is full'
          : serverCode === ''
            ? // Not the service's own error (§6): a reverse proxy's body limit, most likely.
              'too large for the server, or for a proxy in front of it (HTTP 413); if a proxy ' +
              'sits in front of the server, raise its request body limit (for nginx: ' +
              'client_max_body_size)'
            : `too large for the server: ${serverMsg}`;
      break;
    case 429:
      code = 'rate_limited';
      message = 'the server asked to slow down';
      break;
    default:
      code = status >= 500 ? 'server_error' : 'protocol';
      message =
        status >= 500
          ? `the server failed (${typeof body?.msg === 'string' ? `${body.msg}, ` : ''}HTTP ${status})${
              OPERATOR_MSGS.has(serverMsg)
                ? ': tell whoever runs it (its log says why), and run this again once that is seen to'
                : ''
            }`
          : `unexpected answer from the server (HTTP ${status})`;
  }
  return new EngineError(code, message, {
    // This project's service with its database damaged answers every try alike.
    retryable: isRetryableStatus(status) && serverMsg !== DAMAGED_DATABASE_MSG,
    cause: new ServiceAnswer(status, serverCode, serverMsg),
  });
}

export function networkError(url: string, cause: unknown): EngineError {
  const origin = new URL(url).origin;
  const problem = certificateProblemOf(cause);
  if (problem !== undefined)
    return new EngineError(
      'untrusted_server',
      `cannot trust ${origin}: ${problem}; ${certificateAdvice(problem)}`,
      { cause },
    );
  const refusal = proxyRefusalOf(cause);
  if (refusal !== undefined)
    return new EngineError(
      'proxy_refused',
      `the proxy would not reach ${origin}: ${proxyRefusalAdvice(refusal)}`,
      { cause },
    );
  const detail =
    cause instanceof Error
      ? cause.cause instanceof Error
        ? cause.cause.message
        : cause.message
      : String(cause);
  return new EngineError('network', `cannot reach ${origin} (${detail})`, {
    retryable: true,
    cause,
  });
}

/**
 * An answer that broke off part-way after a 2xx status: the server carried the request out. A
 * caller that can find what it made (enrollment.ts, bucket-catalog.ts, bucket-versions.ts,
 * device-approval.ts) tells it by this class.
 */
export class AnswerCutError extends EngineError {}

/**
 * An answer that broke off part-way: the server took the request. Retryable only when sending
 * it again is harmless.
 */
export function answerCut(url: string, cause: unknown, repeatable: boolean): EngineError {
  const detail = cause instanceof Error ? cause.message : String(cause);
  return new AnswerCutError(
    'network',
    `the connection to ${new URL(url).origin} broke part-way through an answer (${detail})`,
    { retryable: repeatable, cause },
  );
}
