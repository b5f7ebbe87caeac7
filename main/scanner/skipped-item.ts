// An entry a backup passed over, and why. The kind tells a host what the user should know:
// whether the version lacks something the user can still get backed up, or nothing at all.

/**
 * - `unreadable`: there, but it could not be read or stored (permission denied, a name that is
 *   not UTF-8, an I/O error): the version lacks it until the user sees to it.
 * - `changed`: deleted, or replaced by something else, while the backup ran; the next backup
 *   takes what is there then.
 * - `special`: a socket, named pipe or device, which no backup stores.
 */
export type SkipKind = 'unreadable' | 'changed' | 'special';

export interface SkippedItem {
  /** Relative to the source root, with '/' separators. */
  readonly path: string;
  readonly reason: string;
  readonly kind: SkipKind;
}

/**
 * The kind of a file-system error met while looking at or reading an entry: gone (ENOENT),
 * made a symbolic link (ELOOP, under O_NOFOLLOW) or something other than a file (ENOTREGULAR)
 * since the walk saw it is a change; anything else leaves it unreadable.
 */
export function skipKindOf(error: unknown): SkipKind {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ELOOP' || code === 'ENOTREGULAR' ? 'changed' : 'unreadable';
}
