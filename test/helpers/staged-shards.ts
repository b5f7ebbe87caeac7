import { readdirSync, statSync } from 'node:fs';
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

/** The staged shard files in a Canopy home's staging folder, by path, with their sizes. */
export function stagedShardFiles(home: string): Map<string, number> {
  const files = new Map<string, number>();
  const staging = path.join(home, 'staging');
  for (const name of stagedLeftovers(home)) {
    const dir = path.join(staging, name);
    if (!statSync(dir).isDirectory()) continue;
    for (const file of readdirSync(dir))
      if (/^shard-\d+\.car$/.test(file))
        files.set(path.join(dir, file), statSync(path.join(dir, file)).size);
  }
  return files;
}
