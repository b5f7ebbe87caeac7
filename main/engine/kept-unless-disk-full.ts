import { isDiskFull } from '../api/index.ts';

/**
 * Runs `write`, a record in the state database that only serves later requests: true once it
 * is written, false when the home's disk had no room for it. Other errors are thrown.
 */
export function keptUnlessDiskFull(write: () => void): boolean {
  try {
    write();
    return true;
  } catch (error) {
    if (!isDiskFull(error)) throw error;
    return false;
  }
}
