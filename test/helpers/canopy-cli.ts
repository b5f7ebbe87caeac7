import { spawn } from 'node:child_process';
import { expect } from 'vitest';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The real `canopy` command as a child process with its own CANOPY_HOME.

/** The `canopy` command's script, for a test that must start it some other way. */
export const CANOPY_BIN = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'bin',
  'canopy.js',
);

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
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CANOPY_BIN, ...args], {
      env: { ...process.env, CANOPY_HOME: home, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      onStdout?.(chunk.toString());
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status: status ?? -1, stdout, stderr }));
  });
}

/**
 * Logs `home` in to the embedded service on `localData` (secrets in a file, so no keyring is
 * needed) and creates a bucket named `bucket`.
 */
export async function loginWithBucket(
  home: string,
  localData: string,
  bucket: string,
): Promise<void> {
  const env = { CANOPY_SECRET_STORE: 'file' };
  const login = await runCanopy(home, ['login', '--local', '--data', localData], env);
  expect(login.status, login.stderr).toBe(0);
  const created = await runCanopy(home, ['buckets', 'create', bucket], env);
  expect(created.status, created.stderr).toBe(0);
}
