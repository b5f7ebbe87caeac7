import { EngineError, formatBytes, formatTime } from '../main/api/index.ts';
import type { Engine } from '../main/index.ts';
import { UsageError } from './command-context.ts';
import { askLine, type GoAhead } from './terminal-question.ts';

// Deleting a bucket deletes every version in it, and its snapshots, for good: the one
// command that can take all of a user's backups at once, and a name mistyped or a line from
// the shell's history run again is all it takes. A bucket holding versions is deleted once the
// user types its name back at the terminal, or with --yes (a script, which has no terminal to
// ask at); an empty one, which holds nothing to lose, at once. A name that does not match, or
// the end of the input (Ctrl-D), deletes nothing.

/** What the bucket holds, in words, for the question and the refusal. */
function holdings(name: string, versions: Awaited<ReturnType<Engine['listVersions']>>): string {
  const newest = versions.reduce((most, version) => Math.max(most, version.created_at), 0);
  const bytes = versions.reduce((sum, version) => sum + version.data_size, 0);
  const count = versions.length === 1 ? '1 version' : `${versions.length} versions`;
  return `bucket "${name}" holds ${count}, the newest made ${formatTime(newest * 1000)} (${formatBytes(bytes)} of data in all)`;
}

/**
 * Returns once the deletion of bucket `name` may go ahead; throws when it may not: a usage
 * error when --yes is needed and was not given, `stopped` when the user did not confirm.
 */
export async function consentToDeleteBucket(
  engine: Engine,
  name: string,
  asked: GoAhead,
): Promise<void> {
  if (asked.yes) return;
  // Also tells a name no bucket has, before anything is asked.
  const versions = await engine.listVersions({ bucket: name });
  if (versions.length === 0) return;
  const held = holdings(name, versions);
  if (!asked.canAsk)
    throw new UsageError(
      `${held}; deleting the bucket deletes them all, for good: add --yes to delete it without being asked`,
    );
  const typed = await askLine(
    `${held}; deleting the bucket deletes them all, for good.\nType the bucket's name to delete it: `,
  );
  if (typed?.trim() !== name)
    throw new EngineError(
      'stopped',
      `bucket "${name}" was not deleted: ${typed === null ? 'no name was typed' : 'the name typed is not its own'}`,
    );
}
