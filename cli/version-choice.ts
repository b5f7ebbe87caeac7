import { formatTime } from '../main/api/index.ts';
import { offlineReason, UsageError, type CommandContext } from './command-context.ts';
import { atTime } from './at-time.ts';

// Which version `canopy ls`, `restore` and `verify` read: the one `--version ID` or
// `--snapshot ID` names, or with `--at TIME` the one the bucket held then (the newest made at
// that time or before); by default the active one. The version `--at` chose is told on stderr,
// with when it was made, so the user sees how far back it goes.

export interface VersionChoice {
  readonly version?: string;
  readonly snapshot?: string;
}

/** The version the command's options name, in bucket `bucket`. */
export async function versionChoice(
  command: CommandContext,
  bucket: string,
): Promise<VersionChoice> {
  const version = command.str('version');
  const snapshot = command.str('snapshot');
  const at = command.str('at');
  if (at === undefined)
    return {
      ...(version === undefined ? {} : { version }),
      ...(snapshot === undefined ? {} : { snapshot }),
    };
  if (version !== undefined || snapshot !== undefined)
    throw new UsageError(
      '--at chooses the version itself: give it without --version or --snapshot',
    );
  const atMs = atTime(at);
  const chosen = await command.engine.versionAsOf({ bucket, atMs });
  const madeAt = formatTime(chosen.version.created_at * 1000);
  const listed =
    chosen.offlineSince === null
      ? ''
      : ` (${offlineReason(chosen.offlineBecause)}: chosen among the bucket's versions as seen at ${formatTime(chosen.offlineSince)})`;
  process.stderr.write(
    `canopy: version ${chosen.version.id}, made ${madeAt}, the newest at ${formatTime(atMs)}${listed}\n`,
  );
  return { version: chosen.version.id };
}
