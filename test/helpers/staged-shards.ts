import { readdirSync } from 'node:fs';
import path from 'node:path';

/** What a Canopy home holds in its staging folder; none at all when it was never made. */
export function stagedLeftovers(home: string): string[] {
  try {
    return readdirSync(path.join(home, 'staging'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}
