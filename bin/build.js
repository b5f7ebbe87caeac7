// `npm run build`: compiles the sources into dist/ and copies the SQL migrations beside them. It
// records when it started reading the sources only once all of that succeeded, so the commands
// (bin/entry-point.js) run a build that failed, or that a source changed after, through tsx.

import { spawnSync } from 'node:child_process';
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILD_INFO } from './entry-point.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const MIGRATIONS = ['main/state/migrations', 'server/store/migrations'];

rmSync(path.join(root, BUILD_INFO), { force: true });
const startedAtMs = Date.now();
const tsc = spawnSync(
  process.execPath,
  [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
  { cwd: root, stdio: 'inherit' },
);
if (tsc.error) throw tsc.error;
if (tsc.status !== 0) {
  console.error(`build: tsc exited with ${tsc.status ?? tsc.signal}`);
  process.exit(1);
}
for (const dir of MIGRATIONS) {
  // Replaced whole, so a migration renamed in the sources does not also run under its old name.
  rmSync(path.join(root, 'dist', dir), { recursive: true, force: true });
  cpSync(path.join(root, dir), path.join(root, 'dist', dir), { recursive: true });
}
writeFileSync(path.join(root, BUILD_INFO), `${JSON.stringify({ startedAtMs })}\n`);
