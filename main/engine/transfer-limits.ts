import { TransferRateLimit, type ServiceClient } from '../service/index.ts';

// The transfer limits a request names (`--limit-upload`, `--limit-download`), for the client
// that runs it: checked before anything else, so that one the engine cannot take is told
// before any network, as a mistyped folder is.

export interface TransferLimitsRequest {
  /** The most bytes a second it sends; as fast as it can when not given. */
  readonly uploadBytesPerSecond?: number;
  /** The most bytes a second it receives; as fast as it can when not given. */
  readonly downloadBytesPerSecond?: number;
}

/** The pace of a request's client: what ServiceClient.pacedBy takes. */
export interface TransferLimits {
  readonly upload?: TransferRateLimit;
  readonly download?: TransferRateLimit;
}

/** The limits `input` names; throws `usage` for one below the least a limit may be. */
export function transferLimitsOf(input: TransferLimitsRequest): TransferLimits {
  const { uploadBytesPerSecond: up, downloadBytesPerSecond: down } = input;
  return {
    ...(up === undefined ? {} : { upload: new TransferRateLimit(up) }),
    ...(down === undefined ? {} : { download: new TransferRateLimit(down) }),
  };
}

/** `client`, paced by `limits`; itself when they name none. */
export function pacedClient(client: ServiceClient, limits: TransferLimits): ServiceClient {
  return limits.upload || limits.download ? client.pacedBy(limits) : client;
}
