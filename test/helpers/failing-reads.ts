import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import path from 'node:path';
import { canopyProcess } from './canopy-command-line.ts';

// A disk that fails to read one file, for a backup: strace answers the process's reads of it
// with an error, as a failing disk would.

/**
 * `canopy backup SOURCE --bucket BUCKET --skip-check` run under strace, which answers the reads
 * of SOURCE/`file` with `failure` (an errno, and when it starts, as strace's inject takes it).
 */
export function backupWithReadsFailing(
  home: string,
  source: string,
  bucket: string,
  file: string,
  failure: string,
): SpawnSyncReturns<string> {
  const canopy = canopyProcess(['backup', source, '--bucket', bucket, '--skip-check'], {
    ...process.env,
    CANOPY_HOME: home,
    CANOPY_SECRET_STORE: 'file',
  });
  return spawnSync(
    'strace',
    [
      '-f',
      '-qq',
      '--seccomp-bpf',
      '-o',
      '/dev/null',
      '-e',
      'trace=read,pread64',
      '-e',
      `inject=read,pread64:error=${failure}`,
      '-P',
      path.join(source, file),
      canopy.command,
      ...canopy.args,
    ],
    { encoding: 'utf8', env: canopy.env },
  );
}
