import { formatBytes } from '../../main/api/index.ts';
import {
  CACHE_TAG_NAME,
  IGNORE_FILE,
  ruleIncludingAgain,
  type BackupRetention,
  type ExcludedItem,
  type SourceExcludeRules,
} from '../../main/index.ts';
import { UsageError, need, type CommandContext } from '../command-context.ts';
import { counted } from '../counted.ts';
import { PHASE_PROGRESS, withLimitShown } from '../progress-line.ts';
import { waitShown } from '../service-wait-lines.ts';
import { sampleCheckLines } from '../sample-check-lines.ts';
import { untilSignalled } from '../signal-stop.ts';
import { uploadLimitOf } from '../transfer-rate.ts';
import { folderWord } from '../working-folder.ts';
import { serverNoticeLines, takeServerNotices } from '../server-notices.ts';

// `canopy backup` (and its dry run) and `canopy excludes`, the rules a backup applies.

/**
 * Random blocks of the bucket a backup fetches again once it is stored, and checks: at most a
 * few MiB, and over many backups a good part of the bucket.
 */
const CHECKED_BLOCKS = 8;

/**
 * A backup's exit status when it stored a version, but without some items it could not read,
 * or found blocks of the bucket that did not come back whole: the version is there, and
 * something needs seeing to.
 */
const BACKUP_INCOMPLETE = 3;

/** What the bucket's retention policy did, for stdout (a failure goes to stderr). */
function retentionLines(retention: BackupRetention | undefined): string[] {
  if (retention === undefined || 'failed' in retention) return [];
  if ('notApplied' in retention)
    return [`did not apply the bucket's retention policy: ${retention.notApplied}`];
  if (retention.removed.length === 0) return [];
  return [
    `removed ${counted(retention.removed.length, 'older version')} by the bucket's retention policy (${retention.policy}): ${retention.removed.join(', ')}`,
  ];
}

/** A folder's exclude rules, in the order they apply. */
function describeExcludes(rules: SourceExcludeRules): string {
  const lines = (list: readonly string[]): string[] =>
    list.length === 0 ? ['  (none)'] : list.map((rule) => `  ${rule}`);
  return [
    `exclude rules for ${rules.dir}, in the order they apply (a later rule wins; "!" includes again):`,
    `Canopy's defaults: ${rules.defaults.join(' ')}`,
    `  and every folder its program tags as a cache (one holding a ${CACHE_TAG_NAME}), unless a rule includes it again`,
    'kept by Canopy for this folder (canopy excludes DIR --add RULE | --remove RULE | --clear):',
    ...lines(rules.kept),
    `${rules.ignoreFile}:`,
    ...lines(rules.fileRules),
  ].join('\n');
}

/** How to keep a cache folder all the same. */
function keptBy(folder: string): string {
  const rule = ruleIncludingAgain(folder, true);
  return rule === undefined
    ? 'a rule that includes it again keeps it'
    : `the rule "${rule}" keeps it`;
}

/** One excluded item, with what it holds and what excludes it, for a dry run. */
function describeExcluded(item: ExcludedItem): string {
  const folder = item.type === 'directory';
  const size = folder
    ? `${counted(item.files, 'file')}, ${formatBytes(item.bytes)}${item.unreadable === 0 ? '' : `, and ${counted(item.unreadable, 'item')} it could not look into`}`
    : formatBytes(item.bytes);
  const { by } = item;
  const why =
    by.from === 'canopy'
      ? "Canopy's own folder, never backed up"
      : by.from === 'cache-tag'
        ? `a cache: its ${CACHE_TAG_NAME} says the program that made it makes it again (${keptBy(item.path)})`
        : `by "${by.rule}" ${by.from === 'defaults' ? "in Canopy's defaults" : by.from === 'kept' ? 'kept for this folder' : `in ${IGNORE_FILE}`}`;
  return `excluded by rules: ${item.path}${folder ? '/' : ''} (${size}), ${why}`;
}

/** The dry run's line above the excluded items: how much they hold in all. */
function excludedTotal(items: readonly ExcludedItem[]): string[] {
  if (items.length === 0) return [];
  const files = items.reduce((sum, item) => sum + item.files, 0);
  const bytes = items.reduce((sum, item) => sum + item.bytes, 0);
  return [
    `would leave out ${counted(items.length, 'item')}, holding ${counted(files, 'file')}, ${formatBytes(bytes)} (canopy excludes DIR shows the rules):`,
  ];
}

export async function backupCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, values, out, str, progressShown } = command;
  command.takesWords(1);
  // Told before anything is read, also by a dry run, which sends nothing.
  const limit = uploadLimitOf(str('limit-upload'));
  if (values['dry-run'] === true) {
    const bucket = str('bucket');
    const plan = await engine.planBackup({
      dir: folderWord(need(sub, 'DIR')),
      ...(bucket === undefined ? {} : { bucket }),
      ...(values['replace-source'] === true ? { replaceSource: true } : {}),
    });
    out.print(
      [
        ...(plan.excludesFrom === null
          ? []
          : [
              `would apply the exclude rules kept for ${plan.excludesFrom}, this bucket's folder before, and keep them for this folder`,
            ]),
        ...(plan.bucketKnown === false
          ? [
              `this computer knows no bucket named ${JSON.stringify(bucket)}, as it last listed them (canopy buckets lists them)`,
            ]
          : []),
        `would back up ${counted(plan.files, 'file')}, ${formatBytes(plan.bytes)}`,
        ...(plan.toRead === null
          ? []
          : [
              `of which it would read ${counted(plan.toRead.files, 'file')} (${formatBytes(plan.toRead.bytes)}), those not backed up here before or changed since; the others are unchanged, and not read again`,
            ]),
        ...excludedTotal(plan.excluded),
        ...plan.excluded.map(describeExcluded),
        ...plan.skipped.map((item) => `would skip ${item.path}: ${item.reason}`),
      ].join('\n'),
      plan,
    );
    if (plan.refusedBecause === null) return;
    // As the backup itself would fail: a script that checks first sees it.
    process.stderr.write(`canopy: the backup would be refused: ${plan.refusedBecause}\n`);
    return 1;
  }
  const progress = progressShown(
    withLimitShown(PHASE_PROGRESS, ['pushing', 'uploading'], limit.uploadBytesPerSecond),
  );
  const result = await untilSignalled((signal) =>
    engine.backup({
      dir: folderWord(need(sub, 'DIR')),
      bucket: need(str('bucket'), '--bucket'),
      ...(values['allow-empty'] === true ? { allowEmpty: true } : {}),
      ...(values['replace-source'] === true ? { replaceSource: true } : {}),
      ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
      ...(values['skip-check'] === true ? {} : { checkBlocks: CHECKED_BLOCKS }),
      ...limit,
      ...waitShown(out.json, progress),
      signal,
    }),
  ).finally(() => progress.done());
  const told = await takeServerNotices(engine);
  const skipped = result.skipped.map((item) => `skipped ${item.path}: ${item.reason}`);
  out.print(
    [
      ...(result.resumedVersionId === null
        ? []
        : [`finished the interrupted upload of version ${result.resumedVersionId}`]),
      result.unchanged
        ? `nothing changed since version ${result.versionId}: no new version made`
        : `version ${result.versionId}`,
      `${counted(result.files, 'file')} (${result.filesUnchanged} unchanged, not read again), ${formatBytes(result.bytesScanned)} scanned, ${formatBytes(result.bytesRead)} read, ${formatBytes(result.newBytes)} new${result.heldBytes > 0 ? ` (${formatBytes(result.heldBytes)} of it on the server already, in another bucket or version)` : ''}, ${formatBytes(result.bytesUploaded)} uploaded${result.metadataBytesUploaded > 0 ? ` (and ${formatBytes(result.metadataBytesUploaded)} of metadata: the names, sizes and times of all the files)` : ''} in ${(result.durationMs / 1000).toFixed(1)} s`,
      ...(result.excludesFrom === null
        ? []
        : [
            `applied the exclude rules kept for ${result.excludesFrom}, this bucket's folder before, and keeps them for this folder from now on (canopy excludes DIR shows them)`,
          ]),
      ...(result.metadataStoredAgain
        ? ['it takes the place of the version before it, whose metadata is damaged on the server']
        : []),
      ...(result.blocksResent === 0
        ? []
        : [
            `sent again ${counted(result.blocksResent, 'block')} the server could not give back whole`,
          ]),
      ...sampleCheckLines(result.sampleCheck),
      ...retentionLines(result.retention),
      ...skipped,
      ...result.changedWhileRead.map(
        (item) =>
          `changed while being read (stored as read; back up again once it settles): ${item}`,
      ),
    ].join('\n'),
    {
      ...result,
      notices: told.notices,
      ...(told.failed === undefined ? {} : { noticesFailed: told.failed }),
    },
  );
  if (!out.json) for (const line of serverNoticeLines(told)) process.stderr.write(`${line}\n`);
  if (result.retention && 'failed' in result.retention)
    process.stderr.write(
      `canopy: the version is stored, but the retention policy set for bucket "${str('bucket') ?? ''}" could not be applied${result.retention.removed.length === 0 ? '' : ` (after removing ${result.retention.removed.join(', ')})`}: ${result.retention.failed}; \`canopy versions prune --bucket ${str('bucket') ?? ''}\` applies it\n`,
    );
  const check = result.sampleCheck;
  const lost = check && !('failed' in check) ? check.unavailable.length : 0;
  if (lost > 0)
    process.stderr.write(
      `canopy: ${counted(lost, 'block')} of bucket "${str('bucket') ?? ''}" did not come back whole (see the output); \`canopy verify --bucket ${str('bucket') ?? ''} --all\` names the files that need ${lost === 1 ? 'it' : 'them'}\n`,
    );
  // As restic's exit code 3: the version is stored, but lacks files the user can still get
  // backed up, or the bucket lacks blocks whole (a version that `verify` would fail); a script
  // run by a timer must see that, not only a person reading stderr. Files deleted meanwhile and
  // sockets, pipes and devices are nothing to see to.
  const unreadable = result.skipped.filter((item) => item.kind === 'unreadable').length;
  if (unreadable > 0)
    process.stderr.write(
      `canopy: ${counted(unreadable, 'item')} could not be read (listed in the output) and ${unreadable === 1 ? 'is' : 'are'} not in the version; everything else is\n`,
    );
  return unreadable > 0 || lost > 0 ? BACKUP_INCOMPLETE : undefined;
}

export async function excludesCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, values, out, strings } = command;
  command.takesWords(1);
  const dir = folderWord(need(sub, 'DIR'));
  const add = strings('add');
  const remove = strings('remove');
  let rules = await engine.excludeRules({ dir });
  if (values['clear'] === true || add.length > 0 || remove.length > 0) {
    const notKept = remove.filter((rule) => !rules.kept.includes(rule));
    if (notKept.length > 0)
      throw new UsageError(
        `not a rule kept for ${rules.dir}: ${notKept.map((rule) => JSON.stringify(rule)).join(', ')}`,
      );
    const kept =
      values['clear'] === true ? [] : rules.kept.filter((rule) => !remove.includes(rule));
    rules = await engine.setExcludeRules({ dir, rules: [...kept, ...add] });
  }
  out.print(describeExcludes(rules), rules);
  return;
}
