// A restore that kills its own process (SIGKILL, no cleanup), as a crash or power cut would,
// once N files are written whole (some renamed to their names, some still under temporary
// names, others part-written); or, given N bytes as `<N>B`, once that many are written, at a
// download limit slow enough to catch a large file part-written.
// Run as: node --import tsx crashing-restore.ts HOME BUCKET TARGET N|<N>B
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';

/** The download limit of a restore killed after a count of bytes: about a second per 16 MB. */
const SLOW_DOWNLOAD_BYTES_PER_SECOND = 16_000_000;

const [home, bucket, target, count] = process.argv.slice(2);
if (home === undefined || bucket === undefined || target === undefined || count === undefined)
  throw new Error('usage: HOME BUCKET TARGET N|<N>B');
const killAtBytes = count.endsWith('B') ? Number(count.slice(0, -1)) : undefined;
const engine = createEngine({
  home,
  secrets: new FileSecretStore(home),
  startLocalService,
  afterFileRestored: (written) => {
    if (killAtBytes === undefined && written >= Number(count)) process.kill(process.pid, 'SIGKILL');
  },
});
await engine.restore({
  bucket,
  to: target,
  overwrite: false,
  ...(killAtBytes === undefined
    ? {}
    : {
        downloadBytesPerSecond: SLOW_DOWNLOAD_BYTES_PER_SECOND,
        onProgress: (progress) => {
          if (progress.phase === 'restoring' && progress.bytesDone >= killAtBytes)
            process.kill(process.pid, 'SIGKILL');
        },
      }),
});
process.stdout.write('restore finished without crashing\n');
// Its embedded service would keep the process running.
await engine.close();
