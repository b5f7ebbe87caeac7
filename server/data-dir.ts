import os from 'node:os';
import path from 'node:path';

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
