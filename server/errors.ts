import { STATUS_OF_CODE, type ServiceErrorCode } from '../main/protocol/index.ts';

/**
 * The one error type of the service. `code` is the spec's stable code (§6); the HTTP status is
 * derived from it in one place. `msg` is safe to show: it never carries internals or secrets.
 */
export class ServiceError extends Error {
  readonly code: ServiceErrorCode;
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ServiceErrorCode, msg: string, headers: Record<string, string> = {}) {
    super(msg);
    this.name = 'ServiceError';
    this.code = code;
    this.status = STATUS_OF_CODE[code];
    this.headers = headers;
  }
}

export const notAuthorized = (): ServiceError =>
  new ServiceError('not_authorized', 'not authorized');
export const notFound = (what = 'not found'): ServiceError => new ServiceError('not_found', what);
export const conflict = (msg: string): ServiceError => new ServiceError('conflict', msg);
export const stalePrevious = (): ServiceError =>
  new ServiceError('stale_previous', "previous_id is not the bucket's active version");
export const invalidRequest = (msg: string): ServiceError =>
  new ServiceError('invalid_request', msg);
export const payloadTooLarge = (msg: string): ServiceError =>
  new ServiceError('payload_too_large', msg);
export const unsupportedMediaType = (expected: string): ServiceError =>
  new ServiceError('unsupported_media_type', `Content-Type must be ${expected}`);
