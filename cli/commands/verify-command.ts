import { formatBytes, formatTime } from '../../main/api/index.ts';
import { need, type CommandContext } from '../command-context.ts';
import { counted } from '../counted.ts';
import { VERIFY_PROGRESS, withLimitShown } from '../progress-line.ts';
import { waitShown } from '../service-wait-lines.ts';
import { untilSignalled } from '../signal-stop.ts';
import { downloadLimitOf } from '../transfer-rate.ts';
import { versionChoice } from '../version-choice.ts';
import { wholeOnRetryLines } from '../whole-on-retry-line.ts';

// `canopy verify`: fetch a version's blocks again and check them against their CIDs.

export async function verifyCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, values, out, str, progressShown } = command;
  command.takesWords(0);
  const limit = downloadLimitOf(str('limit-download'));
  const bucket = need(str('bucket'), '--bucket');
  const chosen = await versionChoice(command, bucket);
  const progress = progressShown(
    withLimitShown(VERIFY_PROGRESS, ['pulling', 'verifying'], limit.downloadBytesPerSecond),
  );
  const result = await untilSignalled((signal) =>
    engine.verify({
      bucket,
      all: values['all'] === true,
      ...chosen,
      ...limit,
      ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
      ...waitShown(out.json, progress),
      signal,
    }),
  ).finally(() => progress.done());
  const asOf = formatTime(result.verifiedAt);
  const lost = result.unavailable.length;
  out.print(
    [
      ...(lost === 0
        ? [
            `verified ${result.checked} of ${counted(result.total, 'block')} (${formatBytes(result.bytes)}) of version ${result.versionId}: restorable as of ${asOf}`,
          ]
        : [
            `checked ${result.checked} of ${counted(result.total, 'block')} of version ${result.versionId}: ${lost} did not come back whole, so it is not restorable in full as of ${asOf}`,
            ...result.unrestorable.map((file) => `cannot restore ${file.path}: ${file.reason}`),
          ]),
      ...wholeOnRetryLines(result.wholeOnRetry.length),
    ].join('\n'),
    result,
  );
  if (lost === 0) return;
  // The version's other files can still be restored; the next backup of the bucket sends
  // the blocks again from those its source still holds.
  process.stderr.write(
    `canopy: ${counted(result.unrestorable.length, 'file')} of this version cannot be restored (listed in the output); the next backup of this bucket sends again what its folder still holds of ${result.unrestorable.length === 1 ? 'it' : 'them'}\n`,
  );
  return 1;
}
