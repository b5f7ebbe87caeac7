import { formatBytes, formatTime } from '../../main/api/index.ts';
import { canopyHome } from '../../main/state/index.ts';
import { UsageError, need, offlineReason, table, type CommandContext } from '../command-context.ts';
import { policyCommand, pruneCommand } from './retention-commands.ts';

// `canopy versions` and `canopy snapshots`: list and delete them, and pin a version; pruning by
// a retention policy is in retention-commands.ts.

export async function versionsCommand(command: CommandContext): Promise<number | undefined> {
  const { engine, sub, rest, out, str } = command;
  if (sub === 'prune') return pruneCommand(command);
  if (sub === 'policy') return policyCommand(command);
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
      `canopy: ${offlineReason(offlineBecause)}; showing the versions as of ${formatTime(offlineSince)}\n`,
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
            // FILES and SIZE: what the version holds. NEW DATA (data_size): what it added to
            // the bucket, or expects to while pending. Sizes as people read them; --json gives
            // the bytes.
            // PINNED: a snapshot keeps it from the pruning of outdated versions.
            ['ID', 'STATE', 'CREATED', 'FILES', 'SIZE', 'NEW DATA', 'PINNED'],
            ...versions.map((v) => {
              const held = totals.get(v.id);
              return [
                v.id,
                v.state,
                formatTime(v.created_at * 1000),
                held ? String(held.files) : '-',
                held ? formatBytes(held.bytes) : '-',
                formatBytes(v.data_size),
                v.snapshot_id === null ? 'no' : 'yes',
              ];
            }),
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
          // SIZE: the bytes of the version's blocks, as people read them; --json gives them.
          ['ID', 'VERSION', 'STATE', 'CREATED', 'SIZE'],
          ...snapshots.map((s) => [
            s.id,
            s.metadata_id,
            s.state,
            formatTime(s.created_at * 1000),
            formatBytes(s.size),
          ]),
        ]),
    snapshots,
  );
  return;
}
