import path from 'node:path';
import { lstatUnlessRefused } from './refused-entry.ts';

// The names a restore gives the version's entries it puts beside what it keeps in the target:
// "a (restored).txt", then "a (restored 2).txt", and so on, the first free one. A file keeps
// its extension last, as the copies Finder, Explorer and the file-syncing services make do, so
// that it still opens in its program; a folder's name takes the suffix at its end
// ("photos.2019 (restored)"). A restore run
// again into the same place (it was stopped, or the user runs it twice) looks at those names
// before making another copy, so that it does not leave a " (restored 2)" beside each
// " (restored)" it made the first time.

/**
 * An entry of the version restored under another name than its own, beside what kept its name
 * in the target (or found so, by a restore before): both paths below the target.
 */
export interface RestoredAs {
  readonly path: string;
  /** The copy's path below the target. */
  readonly as: string;
}

/** The longest name most file systems take, in bytes (Linux's NAME_MAX; exFAT and NTFS: more). */
const NAME_MAX_BYTES = 255;
/** The longest extension kept after the suffix; a longer "extension" is part of the name. */
const EXTENSION_MAX_BYTES = 32;
/** An extension: a dot, then no dots and no white space ("notes.final draft" has none). */
const EXTENSION = /^\.[^.\s]+$/u;
/** An extension that goes with the one before it, such as .tar with .gz. */
const FIRST_OF_TWO_EXTENSIONS = /^\.tar$/iu;

/** `text` cut to at most `bytes` bytes of UTF-8, between characters. */
function cutTo(text: string, bytes: number): string {
  let kept = '';
  let used = 0;
  for (const character of text) {
    used += Buffer.byteLength(character);
    if (used > bytes) break;
    kept += character;
  }
  return kept;
}

/**
 * The extension a file's name ends in, to keep after its suffix: "" for none, for a dotfile
 * (".bashrc") and for a name that is only its extension.
 */
export function extensionOf(name: string): string {
  const last = path.extname(name);
  if (!EXTENSION.test(last) || Buffer.byteLength(last) > EXTENSION_MAX_BYTES) return '';
  const before = path.extname(name.slice(0, -last.length));
  return FIRST_OF_TWO_EXTENSIONS.test(before) ? `${before}${last}` : last;
}

/** What keeps a name in the target, or takes one beside it: folders name their copies apart. */
export type EntryKind = 'folder' | 'file or link';

/**
 * The `index`th name beside `file` for a restored copy of it. A name too long to take the
 * suffix is shortened before it ("long…name (restored).txt"): else the copy of a file whose
 * name is near the limit could not be written at all.
 */
export function restoredName(file: string, index: number, kind: EntryKind): string {
  const suffix = ` (restored${index === 1 ? '' : ` ${index}`})`;
  const name = path.basename(file);
  const extension = kind === 'folder' ? '' : extensionOf(name);
  const stem = name.slice(0, name.length - extension.length);
  const room = NAME_MAX_BYTES - Buffer.byteLength(suffix) - Buffer.byteLength(extension);
  return path.join(path.dirname(file), `${cutTo(stem, room)}${suffix}${extension}`);
}

/**
 * Names a restore may have passed over, one after another, for one entry's copy: it takes the
 * first free name, but not one that a copy of another entry took in another case or Unicode
 * normalization (`café` and `cafe\u0301`, `a.txt` and `A.txt` on one ext4 folder), which a disk
 * that ignores those would take for the same name (restore-version.ts). Each such entry passes
 * over one more name; no folder holds more spellings of one name than this.
 */
const NAMES_PASSED_OVER_MOST = 8;

/**
 * The restored copies beside `file` that are there, in the order a restore names them: up to
 * the first NAMES_PASSED_OVER_MOST + 1 names in a row that nothing has. Ended at the first, a
 * restore run again missed the copy of `cafe\u0301` its first run put at " (restored 2)",
 * `café`'s taking " (restored)", and made another.
 */
export function* restoredCopiesOf(file: string, kind: EntryKind): Generator<string> {
  for (let index = 1, missing = 0; missing <= NAMES_PASSED_OVER_MOST; index += 1) {
    const candidate = restoredName(file, index, kind);
    if (lstatUnlessRefused(candidate) === undefined) {
      missing += 1;
      continue;
    }
    missing = 0;
    yield candidate;
  }
}

/**
 * The folder a restore before made beside what kept `folder`'s name (a file or a link): the
 * first restored copy of it that is a folder, which a restore run again fills instead of
 * making another.
 */
export function restoredFolderCopy(folder: string): string | undefined {
  for (const copy of restoredCopiesOf(folder, 'folder'))
    if (lstatUnlessRefused(copy)?.isDirectory() === true) return copy;
  return undefined;
}

/**
 * Where each of a version's folders is in a restore's target, by its path below the target: at
 * that path, or in the restored copy a restore before made beside a file or link that kept its
 * name (and so is each folder below it).
 */
export class FolderPlaces {
  private readonly places = new Map<string, string>();

  constructor(private readonly targetDir: string) {
    this.places.set('', targetDir);
  }

  /** Where the entry at `relative` is looked for: in its folder's place, under its own name. */
  placeOf(relative: string): string {
    const parent = path.posix.dirname(relative);
    const folder =
      this.places.get(parent === '.' ? '' : parent) ?? path.join(this.targetDir, parent);
    return path.join(folder, path.posix.basename(relative));
  }

  /** Notes that the version's folder at `relative` is at `place`. */
  set(relative: string, place: string): void {
    this.places.set(relative, place);
  }
}
