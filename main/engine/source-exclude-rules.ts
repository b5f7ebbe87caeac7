import path from 'node:path';
import { EngineError } from '../api/index.ts';
import {
  checkSourceFolder,
  DEFAULT_EXCLUDES,
  faultInExcludeRule,
  IGNORE_FILE,
  knownPathOf,
  readIgnoreFile,
} from '../scanner/index.ts';
import {
  excludedSourceDirs,
  keepSourceExcludes,
  sourceExcludesOf,
  type StateDb,
} from '../state/index.ts';
import { absolutePath } from './absolute-path.ts';

// The exclude rules of a source folder, as a user sees and edits them: Canopy's defaults, the
// rules Canopy keeps for the folder, and the folder's own .canopyignore, applied in that order
// (a later rule wins). The kept ones are the user's to change here; the file is theirs to edit.

export interface SourceExcludeRules {
  /** The folder, as an absolute path. */
  readonly dir: string;
  readonly defaults: readonly string[];
  /** Kept in Canopy for this folder, in order. */
  readonly kept: readonly string[];
  /** The folder's .canopyignore. */
  readonly ignoreFile: string;
  /** Its lines that are rules (blank lines and # comments left out); none without the file. */
  readonly fileRules: readonly string[];
}

/**
 * The path `sourceDir`'s rules are kept under: the one they were first kept for, when that names
 * the same folder by another path (same-folder.ts).
 */
function keptUnder(db: StateDb, sourceDir: string): string {
  return knownPathOf(sourceDir, excludedSourceDirs(db));
}

/** The rules kept for the folder `sourceDir` (an absolute path), by whichever path. */
export function keptExcludesOf(db: StateDb, sourceDir: string): string[] {
  return sourceExcludesOf(db, keptUnder(db, sourceDir));
}

/** The rules that apply to the folder `dir`. */
export async function excludeRulesOf(db: StateDb, dir: string): Promise<SourceExcludeRules> {
  const sourceDir = absolutePath(dir);
  checkSourceFolder(sourceDir);
  const file = await readIgnoreFile(sourceDir);
  return {
    dir: sourceDir,
    defaults: DEFAULT_EXCLUDES,
    kept: keptExcludesOf(db, sourceDir),
    ignoreFile: path.join(sourceDir, IGNORE_FILE),
    fileRules: file.split(/\r?\n/).filter((line) => line.trim() !== '' && !line.startsWith('#')),
  };
}

/**
 * Keeps `rules` for the folder `dir` in place of those kept before, once each, in the order
 * given; an empty list keeps none. A rule that is not one line of something is refused
 * (`usage`), and nothing is changed.
 */
export async function setExcludeRules(
  db: StateDb,
  dir: string,
  rules: readonly string[],
): Promise<SourceExcludeRules> {
  const sourceDir = absolutePath(dir);
  checkSourceFolder(sourceDir);
  for (const rule of rules) {
    const fault = faultInExcludeRule(rule);
    if (fault !== undefined)
      throw new EngineError(
        'usage',
        `cannot keep the exclude rule ${JSON.stringify(rule)}: ${fault}`,
      );
  }
  keepExcludesFor(db, sourceDir, rules);
  return excludeRulesOf(db, sourceDir);
}

/** Keeps `rules` (valid ones) for the folder `sourceDir`, once each, in place of those before. */
export function keepExcludesFor(db: StateDb, sourceDir: string, rules: readonly string[]): void {
  keepSourceExcludes(db, keptUnder(db, sourceDir), [...new Set(rules)]);
}
