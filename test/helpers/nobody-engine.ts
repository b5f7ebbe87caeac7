import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chownSync, mkdirSync } from 'node:fs';
import path from 'node:path';

// Engine commands run as `nobody` (engine-as-nobody.ts), each in a process of its own, with a
// Canopy home of nobody's made at `home`: `login BUCKET`, `backup SOURCE BUCKET`,
// `restore BUCKET TARGET [--overwrite]` (its result on stdout), `plan-restore BUCKET TARGET [--overwrite]`,
// `crash-restore BUCKET TARGET N|<N>B` (killed once N files, or N bytes, are written).

const NOBODY = 65534;

export type NobodyEngine = (args: readonly string[]) => SpawnSyncReturns<string>;

export function nobodyEngine(home: string): NobodyEngine {
  mkdirSync(home);
  chownSync(home, NOBODY, NOBODY);
  const helper = path.resolve('test/helpers/engine-as-nobody.ts');
  return (args) =>
    spawnSync(process.execPath, ['--import', 'tsx', helper, home, ...args], {
      encoding: 'utf8',
      env: { ...process.env, HOME: home },
    });
}
