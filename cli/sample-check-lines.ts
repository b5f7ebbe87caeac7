import { formatTime } from '../main/api/index.ts';
import type { SampleCheck } from '../main/restore/index.ts';
import { counted } from './counted.ts';
import { wholeOnRetryLines } from './whole-on-retry-line.ts';

// What `canopy backup` says of the random blocks it fetched again once the backup was stored:
// proof that the bucket can be restored, not only that the upload was answered.

/** The lines for stdout. */
export function sampleCheckLines(check: SampleCheck | undefined): string[] {
  if (check === undefined) return [];
  if ('failed' in check)
    return [`could not fetch blocks of it again to check them: ${check.failed}`];
  if (check.checked === 0) return [];
  const lost = check.unavailable.length;
  const checked = `fetched ${counted(check.checked, 'random block')} of it again`;
  return [
    lost === 0
      ? `${checked}, each whole: restorable as of ${formatTime(check.verifiedAt)}`
      : `${checked}: ${lost} did not come back whole; the next backup sends again what this folder still holds of ${lost === 1 ? 'it' : 'them'}`,
    ...wholeOnRetryLines(check.wholeOnRetry.length),
  ];
}
