/**
 * The errno code (ENOENT, EACCES, …) of a failed system call; undefined for any other error.
 * Node gives it as the error's `code`, which other errors may use for their own kinds of code:
 * callers compare it with errno names only.
 */
export function systemErrorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}
