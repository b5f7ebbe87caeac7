import { formatBytes, formatTime } from '../../main/api/index.ts';
import { typedPath } from '../typed-path.ts';
import type { ChangeCounts, ChangeListener, VersionChange } from '../../main/index.ts';
import { need, offlineReason, type CommandContext } from '../command-context.ts';
import { PHASE_PROGRESS } from '../progress-line.ts';

// `canopy diff`: what changed from one version of a bucket to another, a line per entry, as
// restic's and kopia's diff print it: `+` added, `-` removed, `M` its bytes (or a link's
// target) changed, `U` only its mode or modification time, `T` a file that became a folder or
// a link, or the other way round. Folders end in `/`.

const SIGNS: Readonly<Record<VersionChange['change'], string>> = {
  added: '+',
  removed: '-',
  modified: 'M',
  metadata: 'U',
  type: 'T',
};

/** The line of one change: its sign and its path, escaped as `canopy ls` escapes names. */
function changeLine(change: VersionChange): string {
  const entry = change.after ?? change.before;
  const shown = JSON.stringify(change.path === '' ? '.' : change.path).slice(1, -1);
  return `${SIGNS[change.change]} ${shown}${entry?.type === 'directory' ? '/' : ''}`;
}

/** How many entries changed each way, and the bytes of the files added or changed. */
function summaryOf(counts: ChangeCounts): string {
  const parts = [
    `${counts.added} added`,
    `${counts.removed} removed`,
    `${counts.modified} modified`,
  ];
  if (counts.metadata > 0) parts.push(`${counts.metadata} with only the mode or time changed`);
  if (counts.type > 0) parts.push(`${counts.type} of another type`);
  return `${parts.join(', ')}; ${formatBytes(counts.fileBytesAddedOrModified)} in files added or modified`;
}

function when(createdAt: number): string {
  return formatTime(createdAt * 1000);
}

export async function diffCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, out, str, progressShown } = command;
  command.takesWords(1);
  const from = str('from');
  const to = str('to');
  // Shown only while a version this computer keeps no copy of is fetched.
  const progress = progressShown(PHASE_PROGRESS);
  // Each change is written as it is found, rather than held with all the others and printed
  // whole (the JSON of 100 000 changes peaked at 259 MB that way, 192 MB this way). With
  // --json, the one JSON object the result would make, and how many changed each way.
  const write = (text: string): void => out.write(text);
  let told = 0;
  const listener: ChangeListener = {
    versions(compared) {
      if (compared.offlineSince !== null)
        process.stderr.write(
          `canopy: ${offlineReason(compared.offlineBecause)}; comparing the versions as of ${formatTime(compared.offlineSince)}\n`,
        );
      if (out.json) {
        const { from: older, to: newer, offlineSince, offlineBecause } = compared;
        const head = JSON.stringify({ from: older, to: newer, offlineSince, offlineBecause });
        write(`${head.slice(0, -1)},"changes":[`);
      } else
        write(
          `from version ${compared.from.id} (${when(compared.from.createdAt)}) to version ${compared.to.id} (${when(compared.to.createdAt)})\n`,
        );
    },
    changes(changes) {
      write(
        out.json
          ? `${told === 0 ? '' : ','}${changes.map((change) => JSON.stringify(change)).join(',')}`
          : `${changes.map(changeLine).join('\n')}\n`,
      );
      told += changes.length;
    },
  };
  const { counts } = await engine
    .compare({
      bucket: need(str('bucket'), '--bucket'),
      ...(from === undefined ? {} : { from }),
      ...(to === undefined ? {} : { to }),
      ...(sub === undefined ? {} : typedPath(sub)),
      ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
      onChanges: listener,
    })
    .finally(() => progress.done());
  write(
    out.json
      ? `],"counts":${JSON.stringify(counts)}}\n`
      : `${told === 0 ? 'no changes' : summaryOf(counts)}\n`,
  );
  return;
}
