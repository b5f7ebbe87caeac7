import { statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The service's database in its data folder: a folder holding it holds a service's data. */
export const SERVICE_DATABASE_FILE = 'service.sqlite';

/**
 * Whether `dir` holds a service's data already, as opposed to being missing or empty: an
 * external disk that is not plugged in leaves its mount point empty, or no folder at all, and
 * one pulled out while mounted through FUSE (exFAT, NTFS) leaves a mount whose driver is gone.
 */
export function holdsServiceData(dir: string): boolean {
  try {
    const database = statSync(path.join(dir, SERVICE_DATABASE_FILE), { throwIfNoEntry: false });
    return database?.isFile() === true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTCONN') return false;
    throw error;
  }
}

/** The per-user data folder of the service when `--data` is not given. */
export function defaultServerDataDir(): string {
  const home = os.homedir();
  switch (process.platform) {
    case 'darwin':
      return path.join(home, 'Library', 'Application Support', 'Canopy', 'server');
    case 'win32':
      return path.join(
        process.env['APPDATA'] ?? path.join(home, 'AppData', 'Roaming'),
        'Canopy',
        'server',
      );
    default:
      return path.join(
        process.env['XDG_DATA_HOME'] ?? path.join(home, '.local', 'share'),
        'canopy',
        'server',
      );
  }
}
