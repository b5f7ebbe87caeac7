import { counted } from './counted.ts';

// What the user is told when blocks came back damaged and then whole when fetched again: the
// restore or verify succeeded, yet something between this computer and the server's disk
// damages data at times, which is worth knowing before the day it happens twice in a row.

/** The line for `blocks` blocks whole only on a second fetch; none when there are none. */
export function wholeOnRetryLines(blocks: number): string[] {
  if (blocks === 0) return [];
  return [
    `${counted(blocks, 'block')} came back damaged and whole when fetched again: something on the way (the network, this computer's memory, the server's disk) damages data at times`,
  ];
}
