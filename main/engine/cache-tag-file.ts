import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { isDiskFull } from '../api/index.ts';
import { CACHE_TAG_NAME, CACHE_TAG_SIGNATURE } from '../scanner/index.ts';

// Canopy's metadata cache is a cache by the Cache Directory Tagging convention: every CAR in it
// is pulled again from the storage service when it is needed. So it carries the tag, and other
// backup tools that honour tags (tar, restic, borg and kopia, when asked) leave its
// up to 2 GiB out of their backups, as Canopy leaves out theirs (main/scanner/cache-folders.ts).

const TAG_TEXT = `${CACHE_TAG_SIGNATURE}
# This file is a cache directory tag created by Canopy: the metadata of backup versions,
# fetched again from their storage service when needed. See https://bford.info/cachedir/
`;

/** Writes the cache tag into `folder` unless one is there. */
export function tagAsCache(folder: string): void {
  const tag = path.join(folder, CACHE_TAG_NAME);
  try {
    writeFileSync(tag, TAG_TEXT, { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return;
    // The tag only spares other tools' backups: a disk with no room for it fails nothing. What
    // was made of it goes, or it would stand there empty for good; the next CAR kept writes it.
    if (isDiskFull(error)) {
      rmSync(tag, { force: true });
      return;
    }
    throw error;
  }
}
