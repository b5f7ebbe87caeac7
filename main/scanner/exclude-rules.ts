import { readlinkSync } from 'node:fs';
import path from 'node:path';
import ignore, { type Ignore } from 'ignore';
import { EngineError } from '../api/index.ts';
import { excludingCaches } from './cache-folders.ts';
import { namePrefilter } from './name-prefilter.ts';
import { NotRegularFileError, openSourceHandle } from './source-file.ts';

// Include/exclude rules in gitignore syntax: good defaults for OS junk, temporary, lock and
// partial-download files, then the rules the user keeps in Canopy for the source, then the
// source's own `.canopyignore`. As in git, a later rule wins over an earlier one: a `!pattern`
// re-includes what a rule before it excluded. Dotfiles are backed up unless a rule says
// otherwise.

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
  // The desktop's wastebasket in a home folder: what its owner threw away. On other disks it is
  // `.Trash-1000`, above.
  '/.local/share/Trash/',
  // A restore's files while they are written (main/restore/left-temporaries.ts), seen when it
  // restores into the folder backed up, or was stopped there.
  '.canopy-restore-*',
];

export const IGNORE_FILE = '.canopyignore';

/** What leaves a path out of a backup: a rule, and where the rule is written, or Canopy itself. */
export type ExcludedBy =
  | { readonly from: 'defaults' | 'kept' | 'ignore-file'; readonly rule: string }
  /** Canopy's own folder (own-folders.ts). */
  | { readonly from: 'canopy' }
  /** A folder its program tags as a cache (cache-folders.ts). */
  | { readonly from: 'cache-tag' };

export interface ExcludeRules {
  /**
   * True when `relativePath` ('/' separators) is excluded. Paths are asked in a walk's order:
   * a folder before what it holds, and nothing in a folder found excluded (name-prefilter.ts
   * counts on it).
   */
  excludes(relativePath: string, isDirectory: boolean): boolean;
  /**
   * Why `relativePath` is excluded, or undefined when it is not: for a dry run, which tells the
   * user which line to change. Asked in the same order as `excludes`.
   */
  excludedBy(relativePath: string, isDirectory: boolean): ExcludedBy | undefined;
}

/** The rules as written, which can also tell a path a rule includes again (`!pattern`). */
export interface MatchedRules extends ExcludeRules {
  /** True when the last rule matching `relativePath` includes it again. */
  includesAgain(relativePath: string, isDirectory: boolean): boolean;
}

type RuleMark = 'defaults' | 'kept';

/**
 * Paths tested between two fresh matchers. `ignore` keeps every verdict it gives, and a walk
 * tests every path once, so one matcher for a whole backup held about 13 MB per 100 000 files
 * until the end. A fresh one costs about 0.1 ms, and the verdicts it lacks are only those of the
 * folders above the next paths: a walk tests a folder before what it holds.
 */
export const TESTS_PER_MATCHER = 4096;

/**
 * Why `rule` cannot be kept as one rule, or undefined when it can: a rule is one line that says
 * something. Anything else is gitignore syntax, which matches nothing where it is not valid.
 */
export function faultInExcludeRule(rule: string): string | undefined {
  if (/[\r\n]/.test(rule)) return 'a rule is one line';
  if (rule.trim() === '') return 'a rule cannot be empty';
  return undefined;
}

/** Where `file` links to, when it is a symbolic link; undefined when it is not there at all. */
function danglingLinkTarget(file: string): string | undefined {
  try {
    return readlinkSync(file);
  } catch (error) {
    // ENOENT: nothing there; EINVAL: not a link, gone between the open and here.
    const { code } = error as NodeJS.ErrnoException;
    if (code === 'ENOENT' || code === 'EINVAL') return undefined;
    throw error;
  }
}

/**
 * The source's own rules ('' when it has no `.canopyignore`). One that cannot be read stops the
 * backup with a clear error rather than back up what it would have excluded.
 */
export async function readIgnoreFile(sourceDir: string): Promise<string> {
  const file = path.join(sourceDir, IGNORE_FILE);
  try {
    const handle = await openSourceHandle(file, { followLinks: true });
    try {
      return await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    const denied = code === 'EACCES' || code === 'EPERM';
    let reason: string;
    if (code === 'ENOENT') {
      // A link to rules kept elsewhere that are gone (a dotfiles folder moved, a disk not
      // mounted) stands for rules all the same: without them, what they exclude would be sent.
      const target = danglingLinkTarget(file);
      if (target === undefined) return '';
      reason = `it links to ${target}, which is not there`;
    } else {
      // "It is now …" suits a file that changed under the walk, not the user's own rules file.
      reason = denied
        ? 'permission denied'
        : error instanceof NotRegularFileError
          ? `it is ${error.kind}, not a file`
          : message;
    }
    throw new EngineError(
      denied ? 'permission_denied' : 'usage',
      `cannot read the rules in ${file}: ${reason}; fix or remove it and back up again`,
      { cause: error },
    );
  }
}

/**
 * The rules for `sourceDir`: the defaults, then `kept` (the user's, kept in Canopy), then its
 * file; and the folders in it tagged as caches (cache-folders.ts).
 */
export async function loadExcludeRules(
  sourceDir: string,
  kept: readonly string[] = [],
): Promise<ExcludeRules> {
  return excludingCaches(excludeRulesOf(kept, await readIgnoreFile(sourceDir)), sourceDir);
}

/**
 * The rule that includes again exactly `relativePath` ('/' separators), for a message telling
 * the user how to keep it: anchored to the source folder, with gitignore's wildcards and
 * escapes escaped. Undefined for a name a one-line rule cannot hold (it has a line break).
 */
export function ruleIncludingAgain(relativePath: string, isDirectory: boolean): string | undefined {
  if (/[\r\n]/.test(relativePath)) return undefined;
  const escaped = relativePath.replace(/[\\[\]*?]/g, '\\$&');
  // A trailing space is dropped from a rule unless escaped; a folder's rule ends in '/'.
  return `!/${isDirectory ? `${escaped}/` : escaped.replace(/ $/, '\\ ')}`;
}

/** The defaults, then `kept` (each one rule), then `own` (a `.canopyignore`'s text). */
export function excludeRulesOf(kept: readonly string[], own: string): MatchedRules {
  // Separate calls: `add` splits a string into lines, but takes each item of an array as one
  // rule. The marks tell `excludedBy` where a rule came from; the file's rules carry none.
  const marked = (rules: readonly string[], mark: RuleMark) =>
    rules.map((pattern) => ({ pattern, mark }));
  const fresh = (): Ignore =>
    ignore().add(marked(DEFAULT_EXCLUDES, 'defaults')).add(marked(kept, 'kept')).add(own);
  // The file's lines as `add` splits them: a BOM first and a CR last go, as there.
  const ownText = own.replace(/^\uFEFF/, '').replace(/\r$/, '');
  const mayMatch = namePrefilter([...DEFAULT_EXCLUDES, ...kept, ...ownText.split(/\r?\n/)]);
  let matcher = fresh();
  let tests = 0;
  /** The matcher to ask about `relativePath`, or undefined when no rule can match its name. */
  const matcherFor = (relativePath: string): Ignore | undefined => {
    if (mayMatch && !mayMatch(relativePath.slice(relativePath.lastIndexOf('/') + 1)))
      return undefined;
    tests += 1;
    if (tests > TESTS_PER_MATCHER) {
      matcher = fresh();
      tests = 1;
    }
    return matcher;
  };
  return {
    excludes(relativePath, isDirectory) {
      return (
        matcherFor(relativePath)?.ignores(isDirectory ? `${relativePath}/` : relativePath) === true
      );
    },
    excludedBy(relativePath, isDirectory) {
      const rule = matcherFor(relativePath)?.test(
        isDirectory ? `${relativePath}/` : relativePath,
      ).rule;
      if (rule === undefined) return undefined;
      const from = rule.mark === 'defaults' || rule.mark === 'kept' ? rule.mark : 'ignore-file';
      return { from, rule: rule.pattern };
    },
    includesAgain(relativePath, isDirectory) {
      return (
        matcherFor(relativePath)?.test(isDirectory ? `${relativePath}/` : relativePath)
          .unignored === true
      );
    },
  };
}
