import { formatTime } from '../../main/api/index.ts';
import { typedPath } from '../typed-path.ts';
import type { ItemChangeKind, ItemVersion } from '../../main/index.ts';
import { need, offlineReason, table, type CommandContext } from '../command-context.ts';
import { counted } from '../counted.ts';
import { HISTORY_PROGRESS } from '../progress-line.ts';
import { shellWord } from '../shell-word.ts';

// `canopy history PATH`: the versions in which a file, folder or link differs from the version
// before, newest first, each with the version's id to restore that copy from.

/** The words a row gives each change, as `canopy diff` names them. */
const CHANGE_WORDS: Readonly<Record<ItemChangeKind, string>> = {
  added: 'added',
  removed: 'removed',
  modified: 'modified',
  metadata: 'mode or time',
  type: 'another type',
};

function row(version: ItemVersion): string[] {
  const { entry } = version;
  return [
    version.versionId,
    formatTime(version.createdAt * 1000),
    CHANGE_WORDS[version.change],
    entry === null ? '' : entry.type === 'directory' ? 'dir' : entry.type,
    entry === null || entry.type === 'directory' ? '' : String(entry.size),
    entry?.mtime == null ? '' : formatTime(entry.mtime * 1000),
  ];
}

export async function historyCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, out, str, progressShown } = command;
  command.takesWords(1);
  const bucket = need(str('bucket'), '--bucket');
  const path = need(sub, 'PATH');
  const progress = progressShown(HISTORY_PROGRESS);
  const history = await engine
    .history({
      bucket,
      ...typedPath(path),
      ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
    })
    .finally(() => progress.done());
  if (history.offlineSince !== null)
    process.stderr.write(
      `canopy: ${offlineReason(history.offlineBecause)}; reading the versions as of ${formatTime(history.offlineSince)} that this computer keeps\n`,
    );
  const shown = JSON.stringify(path).slice(1, -1);
  const restorable = history.changes.find((change) => change.entry !== null);
  out.print(
    [
      `${shown} in bucket "${bucket}": ${counted(history.changes.length, 'change')} in ${counted(history.versionsRead, 'version')} read, newest first`,
      table([
        ['VERSION', 'CREATED', 'CHANGE', 'TYPE', 'SIZE', 'MODIFIED'],
        ...history.changes.map(row),
      ]),
      ...history.unread.map(
        (version) => `passed over version ${version.versionId}: ${version.reason}`,
      ),
      ...(restorable
        ? [
            `to restore a copy: canopy restore --bucket ${shellWord(bucket)} --version ID --to DIR ${path.startsWith('-') ? '-- ' : ''}${shellWord(path)}`,
          ]
        : []),
    ].join('\n'),
    history,
  );
  return;
}
