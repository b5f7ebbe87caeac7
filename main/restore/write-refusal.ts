// Why a restore may not write into a folder, in words, from the system's error code. EPERM is
// not the folder's permissions (those give EACCES) but the system's own refusal: a folder
// marked immutable or append-only (chattr +i, +a), which stops root too, or a security module.

/** The words for a refused write's `code`; undefined for a code that is no refusal. */
export function writeRefusalReason(code: string | undefined): string | undefined {
  switch (code) {
    case 'EACCES':
      return 'permission denied';
    case 'EPERM':
      return 'the system refused it (as for a folder marked immutable: lsattr -d shows it)';
    case 'EROFS':
      return 'the disk is read-only';
    default:
      return undefined;
  }
}
