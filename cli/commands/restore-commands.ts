import { formatBytes, formatTime } from '../../main/api/index.ts';
import { downloadLimitOf } from '../transfer-rate.ts';
import { typedPath } from '../typed-path.ts';
import type { RestoredAs, RestoreRequest } from '../../main/index.ts';
import { need, offlineReason, UsageError, type CommandContext } from '../command-context.ts';
import { counted } from '../counted.ts';
import { tableLines } from '../listing-output.ts';
import { PHASE_PROGRESS, withLimitShown } from '../progress-line.ts';
import { waitShown } from '../service-wait-lines.ts';
import { untilSignalled } from '../signal-stop.ts';
import { versionChoice } from '../version-choice.ts';
import { wholeOnRetryLines } from '../whole-on-retry-line.ts';
import { folderWord } from '../working-folder.ts';

// `canopy ls` browses a version; `canopy restore` brings it back.

export async function lsCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, values, out, str, progressShown } = command;
  command.takesWords(1);
  const bucket = need(str('bucket'), '--bucket');
  const chosen = await versionChoice(command, bucket);
  // Shown while a version this computer keeps no copy of is fetched, and while a long listing
  // (`-R`) is made: it is printed once made, in columns as wide as its widest entry.
  const progress = progressShown(PHASE_PROGRESS);
  const { entries, versionId, offlineSince, offlineBecause } = await engine
    .browse({
      bucket,
      ...chosen,
      ...(sub === undefined ? {} : typedPath(sub)),
      ...(values['recursive'] === true ? { recursive: true } : {}),
      ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
    })
    .finally(() => progress.done());
  if (offlineSince !== null) {
    process.stderr.write(
      `canopy: ${offlineReason(offlineBecause)}; showing version ${versionId}, the active one as of ${formatTime(offlineSince)}\n`,
    );
  }
  out.printEach(
    tableLines(entries, (e) => [
      e.type === 'directory' ? 'dir' : e.type,
      e.mode === null ? '-' : e.mode.toString(8).padStart(4, '0'),
      String(e.size),
      e.mtime === null ? '-' : formatTime(e.mtime * 1000),
      e.target === null
        ? JSON.stringify(e.path ?? e.name).slice(1, -1)
        : `${JSON.stringify(e.path ?? e.name).slice(1, -1)} -> ${e.target}`,
    ]),
    entries,
  );
  return;
}

/** Where a restore without --to goes. */
function intoOriginalPlace(place: {
  readonly restoredInto: string;
  readonly backedUpFrom: string | null;
}): string {
  return place.backedUpFrom === null
    ? `into ${place.restoredInto}, where it was backed up from`
    : `into ${place.restoredInto}, where its path names it now (it was backed up from ${place.backedUpFrom})`;
}

/** The entries of a dry run's list, each on its own line below the line that says what they are. */
function listed(heading: string, paths: readonly string[]): string[] {
  return paths.length === 0
    ? []
    : [heading, ...paths.map((item) => `  ${JSON.stringify(item).slice(1, -1)}`)];
}

/**
 * A line for each file or link a restore before put beside what kept its name, found there with
 * the same content: `left` says what becomes of it.
 */
function restoredBeforeLines(items: readonly RestoredAs[], left: string): string[] {
  return items.map(
    (item) => `${item.path} was restored before as ${item.as}, with the same content, and ${left}`,
  );
}

/** `canopy restore --dry-run`: what the restore would do; exits 1 when it would be refused. */
async function restorePlanCommand(
  command: CommandContext,
  request: RestoreRequest,
): Promise<number | undefined> {
  // Shown only while a version this computer keeps no copy of is fetched.
  const progress = command.progressShown(
    withLimitShown(PHASE_PROGRESS, ['pulling'], request.downloadBytesPerSecond),
  );
  const plan = await command.engine
    .planRestore({
      ...request,
      ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
    })
    .finally(() => progress.done());
  const { overwrite } = request;
  command.out.print(
    [
      `would restore version ${plan.versionId} ${request.to === undefined ? intoOriginalPlace(plan) : `into ${plan.restoredInto}`}`,
      `would write ${counted(plan.files, 'file')} (${formatBytes(plan.bytes)}), ${counted(plan.directories, 'folder')}, ${counted(plan.symlinks, 'symlink')}`,
      ...(plan.alreadyThere === 0
        ? []
        : [
            `already there with the same content, and would be left as ${plan.alreadyThere === 1 ? 'it is' : 'they are'}: ${counted(plan.alreadyThere, 'file or link', 'files and links')}`,
          ]),
      ...restoredBeforeLines(plan.restoredBefore, 'would be left as it is'),
      ...(plan.partFiles.files === 0
        ? []
        : [
            `would go on with ${plan.partFiles.files === 1 ? 'the large file' : `the ${plan.partFiles.files} large files`} a stopped restore part-wrote there (${formatBytes(plan.partFiles.bytes)} so far), keeping what ${plan.partFiles.files === 1 ? 'it holds' : 'they hold'} of ${plan.partFiles.files === 1 ? 'its file' : 'their files'} once checked`,
          ]),
      ...listed(
        `would replace ${counted(plan.replaced.length, 'file or link', 'files and links')} there:`,
        plan.replaced,
      ),
      ...listed(
        `would keep ${counted(plan.beside.length, 'item')} there (a file, folder or link of a name it restores${overwrite ? " that it may not replace: a folder, or another user's in a shared folder" : ''}), and restore the version's beside ${plan.beside.length === 1 ? 'it' : 'each'} with " (restored)" added to the name, before its extension${overwrite ? '' : ' (--overwrite replaces files and links)'}:`,
        plan.beside,
      ),
    ].join('\n'),
    plan,
  );
  if (plan.refusedBecause === null) return;
  process.stderr.write(`canopy: the restore would be refused: ${plan.refusedBecause}\n`);
  return 1;
}

export async function restoreCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, values, out, str, progressShown } = command;
  command.takesWords(1);
  // An empty shell variable (`canopy restore "$FILE"`) would have restored the whole version.
  if (sub === '')
    throw new UsageError(
      'the path to restore was given empty; leave it out to restore the whole version',
    );
  const limit = downloadLimitOf(str('limit-download'));
  const bucket = need(str('bucket'), '--bucket');
  const chosen = await versionChoice(command, bucket);
  const given = str('to');
  const to = given === undefined ? undefined : folderWord(given);
  if (values['dry-run'] === true)
    return restorePlanCommand(command, {
      bucket,
      ...(to === undefined ? {} : { to }),
      overwrite: values['overwrite'] === true,
      ...chosen,
      ...(sub === undefined ? {} : typedPath(sub)),
      ...(values['sparse'] === true ? { sparse: true } : {}),
      ...limit,
    });
  const progress = progressShown(
    withLimitShown(PHASE_PROGRESS, ['pulling', 'restoring'], limit.downloadBytesPerSecond),
  );
  const result = await untilSignalled((signal) =>
    engine.restore({
      bucket,
      ...(to === undefined ? {} : { to }),
      overwrite: values['overwrite'] === true,
      ...chosen,
      ...(sub === undefined ? {} : typedPath(sub)),
      ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
      ...(values['sparse'] === true ? { sparse: true } : {}),
      ...limit,
      ...waitShown(out.json, progress),
      signal,
    }),
  ).finally(() => progress.done());
  const notReplaced = new Map(result.notReplaced.map((item) => [item.path, item.reason]));
  out.print(
    [
      ...(result.leftoversRemoved === 0
        ? []
        : [
            `removed ${counted(result.leftoversRemoved, 'unfinished file')} left by a restore that was stopped`,
          ]),
      ...(to === undefined ? [intoOriginalPlace(result)] : []),
      `restored ${counted(result.files, 'file')} (${formatBytes(result.bytes)}), ${counted(result.directories, 'folder')}, ${counted(result.symlinks, 'symlink')}`,
      ...(result.continuedFiles === 0
        ? []
        : [
            `went on with ${counted(result.continuedFiles, 'large file')} a stopped restore had part-written: ${formatBytes(result.keptBytes)} of ${result.continuedFiles === 1 ? 'it' : 'them'} kept, not fetched again`,
          ]),
      ...(result.alreadyThere === 0
        ? []
        : [
            result.alreadyThere === 1
              ? 'already there with the same content, and left as it was: 1 file or link'
              : `already there with the same content, and left as they were: ${result.alreadyThere} files and links`,
          ]),
      ...restoredBeforeLines(result.restoredBefore, 'left as it was'),
      ...result.restoredBeside.map((item) => {
        const reason = notReplaced.get(item.path);
        return reason === undefined
          ? `kept ${item.path}, which was there already (a file, folder or link); restored as ${item.as}`
          : `kept ${item.path}, ${reason}; restored as ${item.as}`;
      }),
      ...(result.modesNotKept === 0
        ? []
        : [
            result.modesNotKept === 1
              ? "the disk would not take the permissions of 1 file or folder; it has the disk's own"
              : `the disk would not take the permissions of ${result.modesNotKept} files and folders; they have the disk's own`,
          ]),
      ...(result.foldersOfOthers === 0
        ? []
        : [
            `${counted(result.foldersOfOthers, 'folder')} of another user's kept ${result.foldersOfOthers === 1 ? 'its' : 'their'} own permissions and times: only ${result.foldersOfOthers === 1 ? 'its' : 'their'} owner may change them`,
          ]),
      ...(result.ownersFromFolders === 0
        ? []
        : [
            `${result.ownersFromFolders === 1 ? '1 file, folder or link' : `${result.ownersFromFolders} files, folders and links`} restored for another user ${result.ownersFromFolders === 1 ? 'takes' : 'take'} the owner and group of the folder ${result.ownersFromFolders === 1 ? 'it went' : 'they went'} into (or of the file replaced), not root's: Canopy keeps no owners`,
          ]),
      ...result.setIdBitsDropped.map(
        (item) =>
          `restored ${item} without its set-user-ID or set-group-ID bit: Canopy keeps no owners, and restored by root it would run as whoever the restore made its owner (chmod u+s or g+s gives it back)`,
      ),
      ...result.notRestored.map((item) => `could not restore ${item.path}: ${item.reason}`),
      ...(result.readAgainBecause === null
        ? []
        : [
            `the next backup of this folder reads the restored files again: ${result.readAgainBecause}`,
          ]),
      ...wholeOnRetryLines(result.wholeOnRetry.length),
    ].join('\n'),
    result,
  );
  const missing = result.notRestored.length;
  if (missing === 0) return;
  // Not a failure of the command, yet not a complete restore either: scripts must see it.
  // Blocks the server could not give back are the next backup's to send again.
  const resent =
    result.unavailable.length === 0
      ? ''
      : `; the next backup of ${str('bucket') ?? ''} sends again what its folder still holds of the blocks that did not come back whole`;
  process.stderr.write(
    `canopy: ${counted(missing, 'item')} could not be restored (listed in the output); everything else is in place${resent}\n`,
  );
  return 1;
}
