import { formatTime } from '../../main/api/index.ts';
import {
  RETENTION_RULES,
  policyOptions,
  type RetentionPolicy,
  type RetentionSpan,
} from '../../main/index.ts';
import { counted } from '../counted.ts';
import { UsageError, need, table, type CommandContext } from '../command-context.ts';

// `canopy versions prune` and `canopy versions policy`: deleting the versions a retention policy
// does not keep, by rules given for the while or set for the bucket, which every backup to it
// from this computer then applies.

const SPAN_UNIT_LETTERS: Readonly<Record<string, RetentionSpan['unit']>> = {
  h: 'hour',
  d: 'day',
  w: 'week',
  m: 'month',
  y: 'year',
};

/** A span as --keep-within takes it: a whole number and a unit letter, `14d` or `6m`. */
function spanOf(given: string): RetentionSpan {
  const [, count, letter] = /^(\d{1,6})([hdwmy])$/.exec(given) ?? [];
  const unit = letter === undefined ? undefined : SPAN_UNIT_LETTERS[letter];
  if (count === undefined || unit === undefined)
    throw new UsageError(
      `--keep-within takes a whole number and a unit, h(ours), d(ays), w(eeks), m(onths) or y(ears), as 14d or 6m; not ${JSON.stringify(given)}`,
    );
  return { count: Number(count), unit };
}

/**
 * The retention policy the --keep-* options give, undefined when none is given; a count must
 * be a whole number.
 */
function policyOf(str: (name: string) => string | undefined): RetentionPolicy | undefined {
  const within = str('keep-within');
  const policy: Partial<Record<(typeof RETENTION_RULES)[number], number>> & {
    within?: RetentionSpan;
  } = within === undefined ? {} : { within: spanOf(within) };
  for (const rule of RETENTION_RULES) {
    const given = str(`keep-${rule}`);
    if (given === undefined) continue;
    if (!/^\d{1,9}$/.test(given))
      throw new UsageError(`--keep-${rule} must be a whole number, not ${JSON.stringify(given)}`);
    policy[rule] = Number(given);
  }
  return Object.keys(policy).length === 0 ? undefined : policy;
}

export async function pruneCommand(command: CommandContext): Promise<undefined> {
  const { engine, out, str, values } = command;
  command.takesWords(1);
  const bucket = need(str('bucket'), '--bucket');
  const dryRun = values['dry-run'] === true;
  const created = (at: number) => formatTime(at * 1000);
  const given = policyOf(str);
  const pruned = await engine.pruneVersions({
    bucket,
    // None given: the policy set for the bucket.
    ...(given ? { policy: given } : {}),
    dryRun,
    // Each told as it goes: a failure part-way stops the command after those removed.
    ...(out.json
      ? {}
      : {
          onRemoved: (version) =>
            process.stdout.write(
              `removed version ${version.id} (${created(version.created_at)})\n`,
            ),
        }),
  });
  const { kept, removed } = pruned;
  const rows = [
    ...kept.map(({ version, because }) => ({ version, line: ['keep', because.join(', ')] })),
    ...removed.map((version) => ({ version, line: ['remove', ''] })),
  ].sort((a, b) => b.version.created_at - a.version.created_at);
  const listed = table(
    rows.map(({ version, line }) => [
      line[0] ?? '',
      version.id,
      created(version.created_at),
      line[1] ?? '',
    ]),
  );
  if (rows.length === 0) {
    out.print(`bucket "${bucket}" has no version stored whole: nothing to prune`, pruned);
    return undefined;
  }
  out.print(
    dryRun
      ? [
          `would keep ${kept.length} and remove ${removed.length} of the ${counted(rows.length, 'version')} of bucket "${bucket}" stored whole:`,
          listed,
        ].join('\n')
      : `kept ${counted(kept.length, 'version')} of bucket "${bucket}" and removed ${removed.length}${removed.length === 0 ? '' : ': their data no other version holds is freed'}`,
    pruned,
  );
  return undefined;
}

/** `canopy versions policy`: shows, sets (--keep-*) or clears (--clear) the bucket's policy. */
export async function policyCommand(command: CommandContext): Promise<undefined> {
  const { engine, out, str, values } = command;
  command.takesWords(1);
  const bucket = need(str('bucket'), '--bucket');
  const given = policyOf(str);
  if (given && values['clear'] === true)
    throw new UsageError('give a retention policy (--keep-...) or --clear, not both');
  if (given === undefined && values['clear'] !== true) {
    const policy = await engine.retentionPolicy({ bucket });
    out.print(
      policy === null
        ? `bucket "${bucket}" has no retention policy set here: its backups from here remove no version`
        : `retention policy of bucket "${bucket}": ${policyOptions(policy)}; every backup to it from here applies it`,
      { policy },
    );
    return undefined;
  }
  const policy = await engine.setRetentionPolicy({ bucket, policy: given ?? null });
  out.print(
    policy === null
      ? `cleared the retention policy of bucket "${bucket}": its backups from here remove no version`
      : `set the retention policy of bucket "${bucket}": ${policyOptions(policy)}; every backup to it from here applies it (canopy versions prune --bucket ${bucket} --dry-run shows what it would remove now)`,
    { policy },
  );
  return undefined;
}
