// The engine's one error type (ARCHITECTURE.md): a stable code hosts branch on, whether a retry
// may help, and the underlying cause. Messages are one clear line for people.

export type EngineErrorCode =
  | 'not_logged_in'
  | 'already_logged_in'
  | 'enrollment_refused'
  | 'not_authorized'
  | 'not_found'
  | 'conflict'
  | 'stale_previous'
  | 'quota_exceeded'
  /**
   * A request larger than the service takes (§14), or an answer of the service's larger than the
   * spec allows (a version's metadata past its limit): asking again does not make it smaller.
   */
  | 'payload_too_large'
  | 'invalid_request'
  | 'rate_limited'
  | 'server_error'
  | 'network'
  | 'timeout'
  | 'insecure_url'
  /**
   * The server's TLS certificate is not one this computer trusts (self-signed, expired, for
   * another name): asking again does not change it.
   */
  | 'untrusted_server'
  /** The HTTP proxy of the environment would not open the way to the server (a 407, a 403). */
  | 'proxy_refused'
  /**
   * The server's address answered with a redirect rather than as the service (a server moved, a
   * network that wants a sign-in first): not followed, since a device's signed request is for
   * that address alone.
   */
  | 'redirected'
  /**
   * The server's address answered, but not as the service does (§6): another web server there,
   * or something in front of the service stopping the request.
   */
  | 'not_canopy_server'
  | 'protocol'
  | 'secret_store'
  | 'local_server'
  /**
   * The embedded service's database is damaged on its disk: its next start puts back the copy
   * it keeps of it (server/store/kept-database-copy.ts), when there is one.
   */
  | 'local_database_damaged'
  /**
   * The embedded service's data folder is gone or empty (its external disk unplugged, most
   * likely); nothing was made in its place.
   */
  | 'local_data_missing'
  | 'disk_full'
  /**
   * Canopy's own state database is damaged (a failing disk, a power cut on a disk that lied
   * about writes): it is set aside and rebuilt from what is intact in it when Canopy next opens
   * it (main/state/state-repair.ts).
   */
  | 'state_damaged'
  /** The service's data is on a disk mounted read-only: it serves reads and refuses changes. */
  | 'read_only'
  /** A local disk (a backup's source, a restore's target) stopped answering: pulled out, or failing. */
  | 'disk_unavailable'
  /** The operating system refused access to a local file or folder (a source, a target). */
  | 'permission_denied'
  | 'source_changed'
  /**
   * The bucket's active version is of another source folder (§17.1): the backup replaces it only
   * when asked to.
   */
  | 'other_source'
  /** A backup's source holds too many files and folders for one version's metadata (§14). */
  | 'source_too_large'
  | 'busy'
  /** A backup's upload outlasted the server's upload window for its version (§10.2). */
  | 'upload_window_over'
  /** The caller stopped the operation (api/stopped.ts). */
  | 'stopped'
  | 'usage';

export class EngineError extends Error {
  readonly code: EngineErrorCode;
  readonly retryable: boolean;

  constructor(
    code: EngineErrorCode,
    message: string,
    options: { retryable?: boolean; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'EngineError';
    this.code = code;
    this.retryable = options.retryable ?? false;
  }
}

export function isEngineError(error: unknown, code?: EngineErrorCode): error is EngineError {
  return error instanceof EngineError && (code === undefined || error.code === code);
}
