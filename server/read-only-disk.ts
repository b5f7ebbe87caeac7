import { accessSync, constants } from 'node:fs';

/**
 * Whether the data folder is on a disk mounted read-only: an external disk the system mounted
 * so, as it does after the disk was pulled out unsafely. Its backups can be served for reading
 * (ServiceOptions.readOnly) and checked; nothing can be stored there.
 */
export function onReadOnlyDisk(dataDir: string): boolean {
  try {
    accessSync(dataDir, constants.W_OK);
    return false;
  } catch (error) {
    // A folder still to be made, or refused for another reason: the service's own start says.
    return (error as NodeJS.ErrnoException).code === 'EROFS';
  }
}
