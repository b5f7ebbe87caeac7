import { isPassingFailure, withMoreSaid } from '../api/index.ts';

// A restore the network or the server stopped part way (the link gone, the server down past
// the retries) keeps every file it finished, and run again it leaves those as they are and
// brings the rest (already-there.ts). Told only "cannot reach …", a user who watched half of a
// large restore arrive could not know whether to start over elsewhere, or what became of the
// files already there: the failure says so.

/**
 * `error`, which stopped a restore into `targetDir` after it wrote `files` files and `symlinks`
 * links, saying that those are in place and that running it again brings the rest; as it
 * came when nothing was written yet, or when running it again would not help.
 */
export function stoppedPartWay(
  error: unknown,
  written: { readonly files: number; readonly symlinks: number },
  targetDir: string,
): unknown {
  const items = written.files + written.symlinks;
  if (items === 0 || !isPassingFailure(error)) return error;
  const what =
    written.symlinks === 0
      ? written.files === 1
        ? 'the file'
        : `the ${written.files} files`
      : items === 1
        ? 'the link'
        : `the ${items} files and links`;
  return withMoreSaid(
    error,
    `the restore stopped part way: ${what} it restored ${items === 1 ? 'is' : 'are'} in place in ${targetDir}, and running it again brings the rest`,
  );
}
