import { RETENTION_RULES, type RetentionPolicy, type RetentionSpan } from '../../main/index.ts';
import { canopyHome } from '../../main/state/index.ts';
import { counted } from '../counted.ts';
import { UsageError, need, offlineReason, table, type CommandContext } from '../command-context.ts';

// `canopy versions` and `canopy snapshots`: list and delete them, prune versions by a retention
// policy, and pin a version.

/** The options of `versions prune` alone: taken by another `versions` command, refused. */
const PRUNE_OPTIONS = ['dry-run', 'keep-within', ...RETENTION_RULES.map((rule) => `keep-${rule}`)];

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

/** The retention policy the --keep-* options give; a count must be a whole number. */
function policyOf(str: (name: string) => string | undefined): RetentionPolicy {
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
  return policy;
}

async function pruneCommand(command: CommandContext): Promise<undefined> {
  const { engine, out, str, values } = command;
  command.takesWords(1);
  const bucket = need(str('bucket'), '--bucket');
  const dryRun = values['dry-run'] === true;
  const created = (at: number) => new Date(at * 1000).toISOString();
  const pruned = await engine.pruneVersions({
    bucket,
    policy: policyOf(str),
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

export async function versionsCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, rest, out, str, values } = command;
  if (sub === 'prune') return pruneCommand(command);
  const pruneOnly = PRUNE_OPTIONS.filter((option) => values[option] !== undefined);
  if (pruneOnly.length > 0)
    throw new UsageError(
      `${pruneOnly.map((option) => `--${option}`).join(', ')}: only versions prune takes ${pruneOnly.length === 1 ? 'it' : 'them'}`,
    );
  if (sub === 'delete') {
    const bucket = need(str('bucket'), '--bucket');
    const ids = [need(rest[0], 'ID'), ...rest.slice(1)];
    // One at a time, each told as it goes: a failure stops the command after those deleted.
    for (const [index, version] of ids.entries()) {
      const deleted = await engine.deleteVersion({ bucket, version });
      const active =
        deleted.activeVersionId === null
          ? `bucket "${bucket}" has no version left`
          : `the active version of bucket "${bucket}" is ${deleted.activeVersionId}`;
      out.print(
        [
          `deleted version ${deleted.versionId}${deleted.snapshotId === null ? '' : ` and its snapshot ${deleted.snapshotId}`}; its data no other version holds is freed`,
          ...(index === ids.length - 1 ? [active] : []),
        ].join('\n'),
        deleted,
      );
    }
    return;
  }
  if (sub !== undefined && sub !== 'list') throw new UsageError(`unknown versions command: ${sub}`);
  command.takesWords(1);
  const { versions, totals, offlineSince, offlineBecause, keptForOffline } =
    await engine.versionsOrLastSeen({ bucket: need(str('bucket'), '--bucket') });
  if (offlineSince !== null)
    process.stderr.write(
      `canopy: ${offlineReason(offlineBecause)}; showing the versions as of ${new Date(offlineSince).toISOString()}\n`,
    );
  if (!keptForOffline)
    process.stderr.write(
      `canopy: not enough free space in ${canopyHome()}, where Canopy keeps its state, to keep this list for when the service cannot be reached\n`,
    );
  const unknown = versions.filter((v) => !totals.has(v.id)).length;
  out.print(
    versions.length === 0
      ? 'no versions yet'
      : [
          table([
            // FILES and BYTES: what the version holds. NEW BYTES (data_size): what it added to
            // the bucket, or expects to while pending.
            // PINNED: a snapshot keeps it from the pruning of outdated versions.
            ['ID', 'STATE', 'CREATED', 'FILES', 'BYTES', 'NEW BYTES', 'PINNED'],
            ...versions.map((v) => [
              v.id,
              v.state,
              new Date(v.created_at * 1000).toISOString(),
              String(totals.get(v.id)?.files ?? '-'),
              String(totals.get(v.id)?.bytes ?? '-'),
              String(v.data_size),
              v.snapshot_id === null ? 'no' : 'yes',
            ]),
          ]),
          ...(unknown === 0
            ? []
            : [
                `-: ${unknown === 1 ? 'a version' : 'versions'} this computer has not read the list of files of yet (canopy ls --version ID reads it)`,
              ]),
        ].join('\n'),
    // Each as the service lists it, with what it holds: null where not known here.
    versions.map((v) => ({
      ...v,
      file_count: totals.get(v.id)?.files ?? null,
      total_bytes: totals.get(v.id)?.bytes ?? null,
    })),
  );
  return;
}

export async function snapshotsCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, rest, out, str } = command;
  if (sub === 'create') {
    command.takesWords(2);
    const bucket = need(str('bucket'), '--bucket');
    const version = rest[0];
    const kept = await engine.snapshotVersion({
      bucket,
      ...(version === undefined ? {} : { version }),
    });
    const { id, state } = kept.snapshot;
    out.print(
      kept.keptAlready
        ? `version ${kept.versionId} is kept already, by snapshot ${id} (${state})`
        : `version ${kept.versionId} is kept: snapshot ${id} (${state}) pins it, and the server keeps it until that snapshot is deleted`,
      kept,
    );
    return;
  }
  if (sub === 'delete') {
    command.takesWords(2);
    const deleted = await engine.deleteSnapshot({
      bucket: need(str('bucket'), '--bucket'),
      snapshot: need(rest[0], 'ID'),
    });
    const { id, metadata_id: version } = deleted.snapshot;
    out.print(
      deleted.versionPruned
        ? `deleted snapshot ${id}; the server pruned its version ${version}, as it does outdated versions past the few it keeps`
        : `deleted snapshot ${id}; version ${version} stays, no longer pinned: the server prunes it once it is outdated and past the few outdated versions it keeps (\`canopy versions delete\` deletes it now)`,
      deleted,
    );
    return;
  }
  if (sub !== undefined && sub !== 'list')
    throw new UsageError(`unknown snapshots command: ${sub}`);
  command.takesWords(1);
  const snapshots = await engine.listSnapshots({ bucket: need(str('bucket'), '--bucket') });
  out.print(
    snapshots.length === 0
      ? 'no snapshots yet'
      : table([
          ['ID', 'VERSION', 'STATE', 'CREATED', 'SIZE'],
          ...snapshots.map((s) => [
            s.id,
            s.metadata_id,
            s.state,
            new Date(s.created_at * 1000).toISOString(),
            String(s.size),
          ]),
        ]),
    snapshots,
  );
  return;
}
