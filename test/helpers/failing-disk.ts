import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import path from 'node:path';
import { canopyProcess } from './canopy-command-line.ts';

// A failing disk, for a command: strace answers the process's system calls `calls` on some
// files with an error, as a failing disk would: the reads of one file of a backup's source, or
// the fsyncs of Canopy's state database.

/**
 * `canopy args` (with CANOPY_HOME `home` and the file secret store) run under strace, which
 * answers its `calls` (e.g. `read,pread64`) on `files` with `failure` (an errno, and when it
 * starts, as strace's inject takes it).
 */
export function canopyWithCallsFailing(
  home: string,
  args: readonly string[],
  calls: string,
  failure: string,
  files: readonly string[],
): SpawnSyncReturns<string> {
  const canopy = canopyProcess([...args], {
    ...process.env,
    CANOPY_HOME: home,
    CANOPY_SECRET_STORE: 'file',
  });
  const [strace = 'strace', ...straceArgs] = underFailingDisk(calls, failure, files);
  return spawnSync(strace, [...straceArgs, canopy.command, ...canopy.args], {
    encoding: 'utf8',
    env: canopy.env,
  });
}

/**
 * The command (strace, with its arguments) that runs the command after it with its `calls` on
 * `files` answered with `failure`, as a failing disk would.
 */
export function underFailingDisk(
  calls: string,
  failure: string,
  files: readonly string[],
): string[] {
  return [
    'strace',
    '-f',
    '-qq',
    '--seccomp-bpf',
    '-o',
    '/dev/null',
    '-e',
    `trace=${calls}`,
    '-e',
    `inject=${calls}:error=${failure}`,
    ...files.flatMap((file) => ['-P', file]),
  ];
}

/**
 * `canopy backup SOURCE --bucket BUCKET --skip-check` run under strace, which answers the reads
 * of SOURCE/`file` with `failure`.
 */
export function backupWithReadsFailing(
  home: string,
  source: string,
  bucket: string,
  file: string,
  failure: string,
): SpawnSyncReturns<string> {
  return canopyWithCallsFailing(
    home,
    ['backup', source, '--bucket', bucket, '--skip-check'],
    'read,pread64',
    failure,
    [path.join(source, file)],
  );
}
