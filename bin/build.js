// `npm run build`: bundles the commands' sources into dist/ with esbuild. It records when it
// started reading the sources only once that succeeded, so the commands (bin/entry-point.js)
// run a build that failed, or that a source changed after, through tsx.
//
// Bundled, not compiled file for file: a command then loads a few dozen files where it loaded
// about a thousand (Canopy's own modules, undici's, Fastify's), each resolved, opened and read
// on its own: `canopy whoami` took 0.31 s where it took 0.49 s compiled file for file, `canopy
// ls` 0.41 s where it took 0.59 s, on the embedded service (npm run bench -- start). Each
// entry keeps its own file (dist/cli/canopy.js, dist/server/cli.js, dist/bench/measured-run.js,
// where bin/entry-point.js and the bench look for them), and what a command imports only when it
// needs it (another command, the embedded service) stays a chunk of its own, loaded then.
// Types are not checked here: `npm run typecheck` does that, and a build does not wait on it.

import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { BUILD_INFO } from './entry-point.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const ENTRIES = ['cli/canopy.ts', 'server/cli.ts', 'bench/measured-run.ts'];

rmSync(path.join(root, BUILD_INFO), { force: true });
const startedAtMs = Date.now();
rmSync(path.join(root, 'dist'), { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: ENTRIES,
  outdir: 'dist',
  outbase: '.',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20.19',
  sourcemap: true,
  // Native modules load their compiled addon from their own folder: they stay in node_modules.
  external: ['better-sqlite3', 'keytar'],
  // The CommonJS packages bundled (undici, Fastify) require Node's own modules, which an ES
  // module bundle can only do through a require of its own.
  banner: {
    js: "import { createRequire as __canopyCreateRequire } from 'node:module'; const require = __canopyCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
writeFileSync(path.join(root, BUILD_INFO), `${JSON.stringify({ startedAtMs })}\n`);
