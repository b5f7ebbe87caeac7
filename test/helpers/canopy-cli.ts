import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import type { Metadata } from '../../main/protocol/index.ts';
import { canopyProcess } from './canopy-command-line.ts';
import { writeSettled } from './settled-file.ts';

// The real `canopy` command as a child process with its own CANOPY_HOME.

export interface CliResult {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function runCanopy(
  home: string,
  args: readonly string[],
  env: Record<string, string> = {},
  onStdout?: (text: string) => void,
): Promise<CliResult> {
  return runCanopyIn(undefined, home, args, env, onStdout);
}

/** runCanopy, run in the working folder `cwd` (this process's own when undefined). */
export function runCanopyIn(
  cwd: string | undefined,
  home: string,
  args: readonly string[],
  env: Record<string, string> = {},
  onStdout?: (text: string) => void,
): Promise<CliResult> {
  return runCanopyAs(cwd, home, args, env, onStdout ? { onStdout } : {});
}

/**
 * runCanopy, with `onStderr` given all its stderr so far each time more comes, and the process,
 * to be signalled.
 */
export function runCanopyWatched(
  home: string,
  args: readonly string[],
  env: Record<string, string>,
  onStderr: (soFar: string, canopy: ChildProcess) => void,
): Promise<CliResult> {
  return runCanopyAs(undefined, home, args, env, { onStderr });
}

/**
 * runCanopy, typed in the empty folder `cwd` after it was deleted under the shell: the shell
 * goes there, removes it, and starts `canopy` in it.
 */
export function runCanopyInDeletedFolder(
  cwd: string,
  home: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<CliResult> {
  mkdirSync(cwd, { recursive: true });
  return runCanopyAs(cwd, home, args, env, {
    wrap: (command, commandArgs) => [
      '/bin/sh',
      ['-c', 'rmdir "$PWD" && exec "$@"', 'sh', command, ...commandArgs],
    ],
  });
}

/**
 * runCanopy on this computer under another host name (as after a rename, or on a network whose
 * DHCP names the computer): in a UTS namespace of its own (`unshare --uts`, as root), whose
 * host name is `hostName`.
 */
export function runCanopyAsHost(
  hostName: string,
  home: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<CliResult> {
  return runCanopyAs(undefined, home, args, env, {
    wrap: (command, commandArgs) => [
      'unshare',
      ['--uts', '/bin/sh', '-c', 'hostname "$0" && exec "$@"', hostName, command, ...commandArgs],
    ],
  });
}

function runCanopyAs(
  cwd: string | undefined,
  home: string,
  args: readonly string[],
  env: Record<string, string>,
  watch: {
    readonly onStdout?: (text: string) => void;
    readonly onStderr?: (soFar: string, canopy: ChildProcess) => void;
    /** What runs `canopy` (its command and arguments given), when not `canopy` itself. */
    readonly wrap?: (command: string, args: readonly string[]) => [string, string[]];
  },
): Promise<CliResult> {
  const { onStdout, onStderr, wrap } = watch;
  return new Promise((resolve, reject) => {
    const canopy = canopyProcess(args, { ...process.env, CANOPY_HOME: home, ...env });
    const [command, commandArgs] = wrap
      ? wrap(canopy.command, canopy.args)
      : [canopy.command, canopy.args];
    const child = spawn(command, commandArgs, {
      env: canopy.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(cwd === undefined ? {} : { cwd }),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      onStdout?.(chunk.toString());
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      onStderr?.(stderr, child);
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status: status ?? -1, stdout, stderr }));
  });
}

/** Secrets in a file, so that no keyring is needed. */
const FILE_SECRETS = { CANOPY_SECRET_STORE: 'file' };

/** Runs `canopy ARGS` in `home` (secrets in a file), expects it to succeed, gives its stdout. */
export async function canopySucceeds(home: string, ...args: string[]): Promise<string> {
  const result = await runCanopy(home, args, FILE_SECRETS);
  expect(result.status, `canopy ${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result.stdout;
}

/** Runs `canopy ARGS` in `home` (secrets in a file), expects the usage status (2), gives its stderr. */
export async function canopyRefusesUsage(home: string, ...args: string[]): Promise<string> {
  const result = await runCanopy(home, args, FILE_SECRETS);
  expect(result.status, `canopy ${args.join(' ')}: ${result.stdout}`).toBe(2);
  return result.stderr;
}

/** Runs `canopy ARGS` in `home` (secrets in a file), expects it to fail (1), gives its stderr. */
export async function canopyFails(home: string, ...args: string[]): Promise<string> {
  const result = await runCanopy(home, args, FILE_SECRETS);
  expect(result.status, `canopy ${args.join(' ')}: ${result.stdout}`).toBe(1);
  return result.stderr;
}

/**
 * Logs `home` in to the embedded service on `localData` (secrets in a file) and creates a
 * bucket named `bucket`, of `type` (backup by default).
 */
export async function loginWithBucket(
  home: string,
  localData: string,
  bucket: string,
  type: 'backup' | 'interactive' = 'backup',
): Promise<void> {
  await canopySucceeds(home, 'login', '--local', '--data', localData);
  await canopySucceeds(home, 'buckets', 'create', bucket, '--type', type, '--class', 'hot');
}

/** The versions of `bucket`, newest first, as `canopy versions --json` lists them. */
export async function versionsListed(home: string, bucket: string): Promise<Metadata[]> {
  return JSON.parse(
    await canopySucceeds(home, 'versions', '--bucket', bucket, '--json'),
  ) as Metadata[];
}

/**
 * In the folder `run`, a home logged in to its own embedded service (its data in `run`), with
 * a backup bucket named `bucket`, and an empty folder to back up.
 */
export async function localHomeWithBucket(run: string, bucket: string) {
  const home = path.join(run, 'home');
  const data = path.join(run, 'data');
  const source = path.join(run, 'source');
  mkdirSync(source, { recursive: true });
  await loginWithBucket(home, data, bucket);
  return { run, home, data, source };
}

/**
 * localHomeWithBucket, its folder holding `files` (each settled: dated a minute back) backed up
 * once; with that version's id.
 */
export async function localHomeBackedUp(
  run: string,
  bucket: string,
  files: Readonly<Record<string, string | Uint8Array>>,
) {
  const local = await localHomeWithBucket(run, bucket);
  for (const [name, bytes] of Object.entries(files))
    writeSettled(path.join(local.source, name), bytes);
  const backup = await canopySucceeds(
    local.home,
    'backup',
    local.source,
    '--bucket',
    bucket,
    '--json',
  );
  const { versionId } = JSON.parse(backup) as { versionId: string };
  return { ...local, versionId };
}
