import { formatTime } from '../../main/api/index.ts';
import { typedPath } from '../typed-path.ts';
import type { VersionChange } from '../../main/index.ts';
import { need, offlineReason, type CommandContext } from '../command-context.ts';
import { counted } from '../counted.ts';
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
function summaryOf(changes: readonly VersionChange[]): string {
  const count = (kind: VersionChange['change']): number =>
    changes.filter((change) => change.change === kind).length;
  const fileBytes = (kind: VersionChange['change']): number =>
    changes
      .filter((change) => change.change === kind && change.after?.type === 'file')
      .reduce((sum, change) => sum + (change.after?.size ?? 0), 0);
  const parts = [
    `${count('added')} added`,
    `${count('removed')} removed`,
    `${count('modified')} modified`,
  ];
  const metadata = count('metadata');
  if (metadata > 0) parts.push(`${metadata} with only the mode or time changed`);
  const retyped = count('type');
  if (retyped > 0) parts.push(`${retyped} of another type`);
  return `${parts.join(', ')}; ${counted(fileBytes('added') + fileBytes('modified'), 'byte')} in files added or modified`;
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
  const compared = await engine
    .compare({
      bucket: need(str('bucket'), '--bucket'),
      ...(from === undefined ? {} : { from }),
      ...(to === undefined ? {} : { to }),
      ...(sub === undefined ? {} : typedPath(sub)),
      ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
    })
    .finally(() => progress.done());
  if (compared.offlineSince !== null)
    process.stderr.write(
      `canopy: ${offlineReason(compared.offlineBecause)}; comparing the versions as of ${formatTime(compared.offlineSince)}\n`,
    );
  const heading = `from version ${compared.from.id} (${when(compared.from.createdAt)}) to version ${compared.to.id} (${when(compared.to.createdAt)})`;
  out.print(
    [
      heading,
      ...compared.changes.map(changeLine),
      compared.changes.length === 0 ? 'no changes' : summaryOf(compared.changes),
    ].join('\n'),
    compared,
  );
  return;
}
