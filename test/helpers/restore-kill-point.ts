import type { EngineDeps } from '../../main/index.ts';
import type { RestoreRequest } from '../../main/engine/version-restorer.ts';

// Where a test's restore kills its own process (SIGKILL, no cleanup), as a crash or power cut
// would: given N, once N files are written whole (some renamed to their names, some still under
// temporary names, others part-written); given `<N>B`, once N bytes are written, at a download
// limit slow enough to catch a large file part-written.

/** The download limit of a restore killed after a count of bytes: about a second per 16 MB. */
const SLOW_DOWNLOAD_BYTES_PER_SECOND = 16_000_000;

export interface RestoreKillPoint {
  /** What the engine is made with. */
  readonly deps: Pick<EngineDeps, 'afterFileRestored'>;
  /** What the restore is asked with. */
  readonly request: Pick<RestoreRequest, 'downloadBytesPerSecond' | 'onProgress'>;
}

/** The kill point `count` (N or `<N>B`) names. */
export function restoreKillPoint(count: string): RestoreKillPoint {
  const kill = (): void => {
    process.kill(process.pid, 'SIGKILL');
  };
  if (!count.endsWith('B')) {
    const files = Number(count);
    return {
      deps: {
        afterFileRestored: (written) => {
          if (written >= files) kill();
        },
      },
      request: {},
    };
  }
  const bytes = Number(count.slice(0, -1));
  return {
    deps: {},
    request: {
      downloadBytesPerSecond: SLOW_DOWNLOAD_BYTES_PER_SECOND,
      onProgress: (progress) => {
        if (progress.phase === 'restoring' && progress.bytesDone >= bytes) kill();
      },
    },
  };
}
