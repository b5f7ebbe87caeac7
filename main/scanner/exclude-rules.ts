import { readFile } from 'node:fs/promises';
import path from 'node:path';
import ignore, { type Ignore } from 'ignore';

// Include/exclude rules in gitignore syntax: good defaults for OS junk, temporary, lock and
// partial-download files, then the source's own `.canopyignore`. Dotfiles are backed up unless
// a rule says otherwise. A `!pattern` in `.canopyignore` re-includes a default.

export const DEFAULT_EXCLUDES: readonly string[] = [
  '.DS_Store',
  '._*',
  '.Spotlight-V100',
  '.Trashes',
  '.Trash-*',
  'Thumbs.db',
  'ehthumbs.db',
  'desktop.ini',
  '$RECYCLE.BIN/',
  '*.tmp',
  '*.temp',
  '*.swp',
  '*~',
  '*.crdownload',
  '*.part',
  '*.partial',
  '*.download',
  '~$*',
  '.~lock.*#',
  'node_modules/.cache/',
  '.cache/',
];

export const IGNORE_FILE = '.canopyignore';

export interface ExcludeRules {
  /** True when `relativePath` ('/' separators) is excluded; directories are tested with a trailing '/'. */
  excludes(relativePath: string, isDirectory: boolean): boolean;
}

export async function loadExcludeRules(sourceDir: string): Promise<ExcludeRules> {
  const rules: Ignore = ignore().add([...DEFAULT_EXCLUDES]);
  try {
    rules.add(await readFile(path.join(sourceDir, IGNORE_FILE), 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  return {
    excludes(relativePath, isDirectory) {
      return rules.ignores(isDirectory ? `${relativePath}/` : relativePath);
    },
  };
}
