// Loads a command's entry module: the compiled one in dist/ when `npm run build` made it from the
// sources as they are now, else the TypeScript source through tsx.
//
// The build starts sooner: each of the ~220-440 modules of Canopy's own a command loads passes
// through tsx's loader, on a thread of its own (npm run bench -- start compares the two). A
// build is used only while no source is newer than the moment it started, so an edited source
// runs as written, never as last built.

import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Written by bin/build.js once a build is complete: when it started reading the sources. */
export const BUILD_INFO = path.join('dist', 'build-info.json');

/**
 * The folders and files a build reads; a change to any of them makes it stale. The build bundles
 * the packages the code imports, so the lock file that records their versions is one.
 */
export const BUILD_INPUTS = [
  'cli',
  'main',
  'server',
  'tsconfig.base.json',
  'bin/build.js',
  'package-lock.json',
];

/**
 * Some file systems keep modification times to the second or two (FAT, exFAT), so a source saved
 * just after a build started may show a time just before it. Sources this close to the start
 * count as newer: at worst a build is passed over until the next one.
 */
const MTIME_SLACK_MS = 2_000;

/**
 * The compiled form of `source` (a path such as `cli/canopy.ts`, relative to `root`) when the
 * build in `root/dist` is complete and no build input changed since it started; else undefined.
 */
export function currentBuildOf(root, source) {
  const compiled = path.join(root, 'dist', source.replace(/\.ts$/, '.js'));
  const startedAtMs = buildStartOf(path.join(root, BUILD_INFO));
  if (startedAtMs === undefined || !existsSync(compiled)) return undefined;
  const newest = Math.max(
    ...BUILD_INPUTS.map((input) => newestChangeUnder(path.join(root, input))),
  );
  return newest < startedAtMs - MTIME_SLACK_MS ? compiled : undefined;
}

/**
 * Imports `source` (relative to the repository), compiled when current, else through tsx.
 * CANOPY_FROM_SOURCE=1 runs the sources all the same (the start bench compares the two).
 */
export async function importEntry(source) {
  const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
  const compiled =
    process.env.CANOPY_FROM_SOURCE === '1' ? undefined : currentBuildOf(root, source);
  if (compiled) return import(pathToFileURL(compiled).href);
  const { register } = await import('tsx/esm/api');
  register();
  return import(pathToFileURL(path.join(root, source)).href);
}

function buildStartOf(infoFile) {
  let info;
  try {
    info = JSON.parse(readFileSync(infoFile, 'utf8'));
  } catch (error) {
    // No build yet (or one stopped before it finished): the sources run through tsx.
    if (error.code === 'ENOENT' || error instanceof SyntaxError) return undefined;
    throw error;
  }
  return typeof info.startedAtMs === 'number' ? info.startedAtMs : undefined;
}

/**
 * The latest modification time of `file`, or of anything under it when it is a folder (a folder's
 * own time changes when an entry is added, removed or renamed in it). Infinity when it is
 * missing: a build input gone is a change.
 */
function newestChangeUnder(file) {
  let stats;
  try {
    stats = statSync(file);
  } catch (error) {
    if (error.code === 'ENOENT') return Infinity;
    throw error;
  }
  if (!stats.isDirectory()) return stats.mtimeMs;
  let newest = stats.mtimeMs;
  for (const name of readdirSync(file)) {
    newest = Math.max(newest, newestChangeUnder(path.join(file, name)));
  }
  return newest;
}
