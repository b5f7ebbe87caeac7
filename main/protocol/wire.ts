// Media types, limits and audience strings of the wire contract (§2, §14).

export const API_PREFIX = '/api/v1';
export const MEDIA_JSON = 'application/json';
export const MEDIA_CAR = 'application/vnd.ipld.car';
export const MEDIA_MULTIPART = 'multipart/form-data';
export const PART_REQUEST_DATA = 'request-data';
export const PART_CAR_UPLOAD = 'car-upload';

/**
 * The `msg` of this project's service when its disk is full (a 500, as the operator's to fix).
 * The embedded service's client tells it as the user's own backup disk full.
 */
export const OUT_OF_SPACE_MSG = 'the service is out of storage space';

/**
 * The room this project's service leaves free on the disk of its data by default, refusing new
 * data that would dip into it as out of space (server/store/kept-free.ts): 1 % of the disk, at
 * most 1 GiB.
 */
export const DEFAULT_KEPT_FREE = { fraction: 0.01, maxBytes: 1 << 30 } as const;

/**
 * The `msg` of this project's service when its database is damaged on its disk (a 500: the
 * operator restores it from a copy). The embedded service's client tells it as the user's own.
 */
export const DAMAGED_DATABASE_MSG = "the service's database is damaged";

/**
 * The `msg` of this project's service when its disk fails a read or a write (an I/O error: a
 * failing disk; a 500, as the operator's to fix). The embedded service's client tells it as the
 * user's own backup disk failing.
 */
export const DISK_FAILED_MSG = "the service's disk failed to read or write its data";

/**
 * The `msg` of this project's service when a file of its data is missing from its disk (a 500,
 * as the operator's to fix). The embedded service's client tells it as files of the user's own
 * backups missing.
 */
export const DATA_FILE_MISSING_MSG = "a file of the service's data is missing from its disk";

/**
 * The start of the `msg` of a 404 from this project's service for blocks/car when it holds
 * none of some blocks asked for (for the caller: §11.5), followed by `: ` and their CIDs,
 * space-separated (up to 1000 of them), so that the client need not search for them.
 */
export const BLOCKS_NOT_HELD_MSG = 'blocks asked for are not held';

/** The most CIDs a 404 of this project's service for blocks/car names. */
export const MOST_BLOCKS_NAMED = 1000;

/**
 * The start of the `msg` of a 404 from this project's service for blocks/car when blocks asked
 * for cannot be read from its disk (an I/O error met while an earlier answer was sent),
 * followed by `: ` and their CIDs, space-separated (up to 1000 of them). The client tells those
 * blocks apart from ones the host lacks, and asks again for the others.
 */
export const UNREADABLE_BLOCK_MSG = "a block cannot be read from the service's disk";

/**
 * The `msg` of a 409 from this project's service when its data folder is on a disk mounted
 * read-only: it serves reads (browsing, restores, verifies) and refuses everything else.
 */
export const READ_ONLY_MSG =
  'the service data is on a disk mounted read-only: its backups can be browsed and restored, but nothing can be stored or changed until the disk is mounted writable';

export const KiB = 1024;
export const MiB = 1024 * KiB;

export const DEFAULT_LIMITS = {
  jsonBodyBytes: 1 * MiB,
  requestDataBytes: 128 * KiB,
  metadataCarBytes: 128 * MiB,
  shardBytes: 256 * MiB,
  blockBytes: 4 * MiB,
  drainBytes: 8 * MiB,
  cidsPerRequest: 10_000,
  validKeys: 100,
} as const;

export type SizeLimits = { readonly [K in keyof typeof DEFAULT_LIMITS]: number };
