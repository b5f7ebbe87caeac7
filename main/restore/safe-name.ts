import { EngineError } from '../api/index.ts';

// A name in a version's tree, checked before it is looked up or made in a restore's target: a
// hostile server's tree could name `..` or a path with slashes, and lead out of the target.

/** Throws unless `name` is one name, not a way out of the folder it is in. */
export function checkName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new EngineError(
      'protocol',
      `the version holds an unsafe name ${JSON.stringify(name)}; restore stopped`,
    );
  }
}
