import { EngineError } from '../api/index.ts';

// Versions and snapshots are named by the service's ids, UUIDs of 36 characters. A user copies
// one from `canopy versions`, or types its start, as with git's commits: the start of an id
// names the one version (or snapshot) whose id begins so, when no other does.

/** The fewest characters of an id that name it: fewer would too often name several. */
export const SHORTEST_ID_START = 4;

/**
 * The item whose id is `typed`, else the one whose id alone begins with it (SHORTEST_ID_START
 * characters at least, in either case); undefined when none. Several beginning so, or fewer
 * characters than that beginning any, is a usage error: `what` says what the items are
 * ('versions of bucket "Photos"').
 */
export function namedById<T extends { readonly id: string }>(
  items: readonly T[],
  typed: string,
  what: string,
): T | undefined {
  const exact = items.find((item) => item.id === typed);
  if (exact) return exact;
  const start = typed.toLowerCase();
  const starting =
    start === '' ? [] : items.filter((item) => item.id.toLowerCase().startsWith(start));
  if (starting.length > 0 && start.length < SHORTEST_ID_START)
    throw new EngineError(
      'usage',
      `${typed} is too short to name one of the ${what}; give at least ${SHORTEST_ID_START} characters of its id`,
    );
  if (starting.length > 1)
    throw new EngineError(
      'usage',
      `${typed} is the start of ${starting.length} ${what} (${starting.map((item) => item.id).join(', ')}); give more of the id`,
    );
  return starting[0];
}
