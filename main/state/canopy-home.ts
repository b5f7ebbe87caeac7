import os from 'node:os';
import path from 'node:path';

/** The Canopy home: `CANOPY_HOME`, else the platform's per-user data folder. */
export function canopyHome(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env['CANOPY_HOME'];
  if (configured !== undefined && configured !== '') return path.resolve(configured);
  const home = os.homedir();
  switch (process.platform) {
    case 'darwin':
      return path.join(home, 'Library', 'Application Support', 'Canopy');
    case 'win32':
      return path.join(env['APPDATA'] ?? path.join(home, 'AppData', 'Roaming'), 'Canopy');
    default:
      return path.join(
        env['XDG_DATA_HOME'] ?? path.join(home, '.local', 'share'),
        'canopy',
        'client',
      );
  }
}
