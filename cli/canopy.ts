import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { EngineError, isEngineError, type EngineErrorCode } from '../main/api/index.ts';
import { openSecretStore, secretStoreChoice } from '../main/identity/index.ts';
import {
  createEngine,
  type AccountSummary,
  type Engine,
  type SourceExcludeRules,
} from '../main/index.ts';
import { counted } from './counted.ts';
import { isPhaseEnd, isVerifyEnd, progressLine, verifyProgressLine } from './progress-line.ts';
import { progressPrinter, type ProgressPrinter, type ProgressView } from './progress-printer.ts';
import {
  BUCKET_TYPES,
  STORAGE_CLASSES,
  type BucketType,
  type StorageClass,
} from '../main/protocol/index.ts';
import { canopyHome } from '../main/state/index.ts';
import { startLocalService } from './local-service.ts';
import { stateRepairNotice } from './state-repair-notice.ts';
import { localDatabaseNotice } from './local-database-notice.ts';
import { wholeOnRetryLines } from './whole-on-retry-line.ts';
import { sampleCheckLines } from './sample-check-lines.ts';
import { StoppedBySignal, untilSignalled } from './signal-stop.ts';

// `canopy`: the engine from the command line, for people and for our own tests.

const USAGE = `usage: canopy <command> [options]   (every command takes --json)

  login --server URL --code CODE [--name DEVICE]   enroll this device with a server
  login --local [--data DIR] [--name DEVICE]        back up to this computer or a disk
  link --server URL [--name DEVICE]                 wait until another device approves this one
  whoami | logout
  devices [list | approve PEMFILE [--name N] | revoke ID | code]
  buckets [list | create NAME --type backup|interactive --class hot|warm|cold
           | rename NAME NEWNAME | delete NAME]
  backup DIR --bucket NAME [--dry-run] [--progress] [--allow-empty] [--replace-source] [--skip-check]
  excludes DIR [--add RULE]... [--remove RULE]... [--clear]
                                                    the folder's exclude rules (gitignore lines)
  versions --bucket NAME | snapshots --bucket NAME
  versions delete ID... --bucket NAME               delete versions (and their snapshots), freeing
                                                    their data no other version holds
  snapshots delete ID --bucket NAME                 unpin a version; the version stays
  ls --bucket NAME [--version ID | --snapshot ID] [PATH] [--progress]
  restore --bucket NAME [--version ID | --snapshot ID] [PATH] [--to DIR] [--overwrite]
          [--sparse] [--progress]                   without --to, to where it was backed up from;
                                                    --sparse leaves runs of zeros as holes
  verify --bucket NAME [--version ID] [--all] [--progress]
  account [show | set [--display-name NAME] [--locale TAG]]
  invoices
  notifications [list | dismiss ID]

exit status: 0 done, 1 failed, 2 usage; backup 3: stored, without items it could not read
environment: CANOPY_HOME (default: the per-user data folder), CANOPY_SECRET_STORE=keychain|file`;

class UsageError extends Error {}

/**
 * Random blocks of the bucket a backup fetches again once it is stored, and checks: at most a
 * few MiB, and over many backups a good part of the bucket.
 */
const CHECKED_BLOCKS = 8;

/** A backup's exit status when it stored a version without some items it could not read. */
const BACKUP_INCOMPLETE = 3;

interface Output {
  json: boolean;
  print(human: string, data: unknown): void;
}

function need(value: string | undefined, what: string): string {
  if (value === undefined || value === '') throw new UsageError(`${what} is required`);
  return value;
}

function oneOf<T extends string>(
  value: string | undefined,
  what: string,
  options: readonly T[],
): T {
  if (value === undefined || !(options as readonly string[]).includes(value)) {
    throw new UsageError(`${what} must be one of ${options.join(', ')}`);
  }
  return value as T;
}

function describeAccount(account: AccountSummary): string {
  const where = account.mode === 'local' ? `this computer (${account.server})` : account.server;
  return [
    `logged in to ${where}`,
    `user ${account.userId}${account.email ? ` <${account.email}>` : ''}`,
    `device key ${account.keyId} (fingerprint ${account.fingerprint}) in the ${account.secretStore === 'keychain' ? 'OS keychain' : 'secrets file'}`,
  ].join('\n');
}

/** Why a listing shows what was seen last rather than the service's answer. */
function offlineReason(code: EngineErrorCode | null): string {
  return code === 'local_data_missing'
    ? 'the disk holding the backups is not connected'
    : 'the server cannot be reached';
}

function table(rows: readonly (readonly string[])[]): string {
  if (rows.length === 0) return '';
  const widths =
    rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** A folder's exclude rules, in the order they apply. */
function describeExcludes(rules: SourceExcludeRules): string {
  const lines = (list: readonly string[]): string[] =>
    list.length === 0 ? ['  (none)'] : list.map((rule) => `  ${rule}`);
  return [
    `exclude rules for ${rules.dir}, in the order they apply (a later rule wins; "!" includes again):`,
    `Canopy's defaults: ${rules.defaults.join(' ')}`,
    'kept by Canopy for this folder (canopy excludes DIR --add RULE | --remove RULE | --clear):',
    ...lines(rules.kept),
    `${rules.ignoreFile}:`,
    ...lines(rules.fileRules),
  ].join('\n');
}

/** Runs one command; its exit status when that is not 0 without an error (a partial restore). */
async function run(
  engine: Engine,
  positionals: string[],
  values: Record<string, string | boolean | string[] | undefined>,
  out: Output,
): Promise<number | undefined> {
  const [command, sub, ...rest] = positionals;
  const str = (name: string): string | undefined => {
    const value = values[name];
    return typeof value === 'string' ? value : undefined;
  };
  const strings = (name: string): string[] => {
    const value = values[name];
    return Array.isArray(value) ? value : [];
  };
  /** Progress in place on a terminal (unless the output is JSON), or as lines with --progress. */
  const progressShown = <Progress>(view: ProgressView<Progress>): ProgressPrinter<Progress> =>
    progressPrinter(process.stderr.isTTY && !out.json, values['progress'] === true, view);
  switch (command) {
    case 'excludes': {
      const dir = need(sub, 'DIR');
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
    case 'login': {
      const name = str('name');
      const dataDir = str('data');
      const account =
        values['local'] === true
          ? await engine.loginLocal({
              ...(dataDir === undefined ? {} : { dataDir }),
              ...(name === undefined ? {} : { deviceName: name }),
            })
          : await engine.login({
              server: need(str('server'), '--server (or --local)'),
              code: need(str('code'), '--code'),
              ...(name === undefined ? {} : { deviceName: name }),
            });
      out.print(describeAccount(account), account);
      return;
    }
    case 'link': {
      const name = str('name');
      const account = await engine.link({
        server: need(str('server'), '--server'),
        ...(name === undefined ? {} : { deviceName: name }),
        onWaiting: ({ fingerprint, pem }) => {
          if (out.json)
            process.stdout.write(`${JSON.stringify({ waiting: true, fingerprint, pem })}\n`);
          else
            process.stdout.write(
              `This device's fingerprint: ${fingerprint}\nApprove it from a linked device with \`canopy devices approve FILE\`, FILE holding:\n${pem}Waiting for approval…\n`,
            );
        },
      });
      out.print(
        `${describeAccount(account)}\nCheck that ${account.email ?? 'this account'} is your account before your first backup: anyone who sees a public key can register it.`,
        account,
      );
      return;
    }
    case 'whoami': {
      const account = await engine.whoami();
      if (account.offlineBecause !== null)
        process.stderr.write(
          `canopy: ${offlineReason(account.offlineBecause)}; showing the account as this device enrolled it\n`,
        );
      out.print(
        account.storageHost === null
          ? describeAccount(account)
          : `${describeAccount(account)}\nstorage host ${account.storageHost}`,
        account,
      );
      return;
    }
    case 'logout':
      await engine.logout();
      out.print('logged out; this device key was deleted', { loggedOut: true });
      return;
    case 'devices': {
      switch (sub ?? 'list') {
        case 'list': {
          const devices = await engine.listDevices();
          out.print(
            table([
              ['ID', 'NAME', 'FINGERPRINT', 'LAST SEEN'],
              ...devices.map((d) => [
                d.id,
                `${d.name ?? '-'}${d.current ? ' (this device)' : ''}`,
                d.fingerprint,
                d.last_seen_at === null ? 'never' : new Date(d.last_seen_at * 1000).toISOString(),
              ]),
            ]),
            devices,
          );
          return;
        }
        case 'approve': {
          const file = need(rest[0], 'PEMFILE');
          let pem: string;
          try {
            pem = readFileSync(file, 'utf8');
          } catch {
            throw new UsageError(`cannot read ${file}`);
          }
          const name = str('name');
          const added = await engine.approveDevice({
            pem,
            ...(name === undefined ? {} : { name }),
          });
          out.print(`approved device ${added.id} (fingerprint ${added.fingerprint})`, added);
          return;
        }
        case 'revoke': {
          const id = need(rest[0], 'ID');
          await engine.revokeDevice(id);
          out.print(`revoked device ${id}`, { revoked: id });
          return;
        }
        case 'code': {
          const issued = await engine.newEnrollmentCode();
          out.print(
            `enrollment code ${issued.code} (valid until ${new Date(issued.expiresAt * 1000).toISOString()})`,
            issued,
          );
          return;
        }
        default:
          throw new UsageError(`unknown devices command: ${sub}`);
      }
    }
    case 'buckets': {
      switch (sub ?? 'list') {
        case 'list': {
          const buckets = await engine.listBuckets();
          out.print(
            buckets.length === 0
              ? 'no buckets yet'
              : table([
                  ['NAME', 'TYPE', 'CLASS', 'UPDATED'],
                  ...buckets.map((b) => [b.name, b.type, b.storage_class, b.updated_at]),
                ]),
            buckets,
          );
          return;
        }
        case 'create': {
          const bucket = await engine.createBucket({
            name: need(rest[0], 'NAME'),
            type: oneOf<BucketType>(str('type') ?? 'backup', '--type', BUCKET_TYPES),
            storageClass: oneOf<StorageClass>(str('class') ?? 'hot', '--class', STORAGE_CLASSES),
          });
          out.print(
            `created bucket "${bucket.name}" (${bucket.type}, ${bucket.storage_class})`,
            bucket,
          );
          return;
        }
        case 'rename': {
          const bucket = await engine.renameBucket({
            name: need(rest[0], 'NAME'),
            newName: need(rest[1], 'NEWNAME'),
          });
          out.print(`renamed bucket to "${bucket.name}"`, bucket);
          return;
        }
        case 'delete': {
          const name = need(rest[0], 'NAME');
          await engine.deleteBucket({ name });
          out.print(`deleted bucket "${name}"`, { deleted: name });
          return;
        }
        default:
          throw new UsageError(`unknown buckets command: ${sub}`);
      }
    }
    case 'backup': {
      if (values['dry-run'] === true) {
        const plan = await engine.planBackup({ dir: need(sub, 'DIR') });
        out.print(
          [
            `would back up ${counted(plan.files, 'file')}, ${counted(plan.bytes, 'byte')}`,
            ...plan.excluded.map((item) => `excluded by rules: ${item}`),
            ...plan.skipped.map((item) => `would skip ${item.path}: ${item.reason}`),
          ].join('\n'),
          plan,
        );
        return;
      }
      const progress = progressShown({
        line: progressLine,
        ended: isPhaseEnd,
        phase: (p) => p.phase,
      });
      const result = await untilSignalled((signal) =>
        engine.backup({
          dir: need(sub, 'DIR'),
          bucket: need(str('bucket'), '--bucket'),
          ...(values['allow-empty'] === true ? { allowEmpty: true } : {}),
          ...(values['replace-source'] === true ? { replaceSource: true } : {}),
          ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
          ...(values['skip-check'] === true ? {} : { checkBlocks: CHECKED_BLOCKS }),
          signal,
        }),
      ).finally(() => progress.done());
      const skipped = result.skipped.map((item) => `skipped ${item.path}: ${item.reason}`);
      out.print(
        [
          ...(result.resumedVersionId === null
            ? []
            : [`finished the interrupted upload of version ${result.resumedVersionId}`]),
          result.unchanged
            ? `nothing changed since version ${result.versionId}: no new version made`
            : `version ${result.versionId}`,
          `${counted(result.files, 'file')} (${result.filesUnchanged} unchanged, not read again), ${counted(result.bytesScanned, 'byte')} scanned, ${counted(result.bytesRead, 'byte')} read, ${counted(result.newBytes, 'new byte')}, ${counted(result.bytesUploaded, 'byte')} uploaded${result.metadataBytesUploaded > 0 ? ` (and ${counted(result.metadataBytesUploaded, 'byte')} of metadata: the names, sizes and times of all the files)` : ''} in ${(result.durationMs / 1000).toFixed(1)} s`,
          ...(result.metadataStoredAgain
            ? [
                'it takes the place of the version before it, whose metadata is damaged on the server',
              ]
            : []),
          ...(result.blocksResent === 0
            ? []
            : [
                `sent again ${counted(result.blocksResent, 'block')} the server could not give back whole`,
              ]),
          ...sampleCheckLines(result.sampleCheck),
          ...skipped,
          ...result.changedWhileRead.map(
            (item) =>
              `changed while being read (stored as read; back up again once it settles): ${item}`,
          ),
        ].join('\n'),
        result,
      );
      const check = result.sampleCheck;
      const lost = check && !('failed' in check) ? check.unavailable.length : 0;
      if (lost > 0)
        process.stderr.write(
          `canopy: ${counted(lost, 'block')} of bucket "${str('bucket') ?? ''}" did not come back whole (see the output); \`canopy verify --bucket ${str('bucket') ?? ''} --all\` names the files that need ${lost === 1 ? 'it' : 'them'}\n`,
        );
      // As restic's exit code 3: the version is stored, but lacks files the user can still get
      // backed up; a script must see that. Files deleted meanwhile and sockets, pipes and devices
      // are nothing to see to.
      const unreadable = result.skipped.filter((item) => item.kind === 'unreadable').length;
      if (unreadable === 0) return;
      process.stderr.write(
        `canopy: ${counted(unreadable, 'item')} could not be read (listed in the output) and ${unreadable === 1 ? 'is' : 'are'} not in the version; everything else is\n`,
      );
      return BACKUP_INCOMPLETE;
    }
    case 'versions': {
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
      if (sub !== undefined && sub !== 'list')
        throw new UsageError(`unknown versions command: ${sub}`);
      const { versions, offlineSince, offlineBecause, keptForOffline } =
        await engine.versionsOrLastSeen({ bucket: need(str('bucket'), '--bucket') });
      if (offlineSince !== null)
        process.stderr.write(
          `canopy: ${offlineReason(offlineBecause)}; showing the versions as of ${new Date(offlineSince).toISOString()}\n`,
        );
      if (!keptForOffline)
        process.stderr.write(
          `canopy: not enough free space in ${canopyHome()}, where Canopy keeps its state, to keep this list for when the service cannot be reached\n`,
        );
      out.print(
        versions.length === 0
          ? 'no versions yet'
          : table([
              // data_size: what the version added to the bucket, or expects to while pending.
              ['ID', 'STATE', 'CREATED', 'NEW BYTES'],
              ...versions.map((v) => [
                v.id,
                v.state,
                new Date(v.created_at * 1000).toISOString(),
                String(v.data_size),
              ]),
            ]),
        versions,
      );
      return;
    }
    case 'snapshots': {
      if (sub === 'delete') {
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
    case 'ls': {
      const version = str('version');
      const snapshot = str('snapshot');
      // Shown only while a version this computer keeps no copy of is fetched.
      const progress = progressShown({
        line: progressLine,
        ended: isPhaseEnd,
        phase: (p) => p.phase,
      });
      const { entries, versionId, offlineSince, offlineBecause } = await engine
        .browse({
          bucket: need(str('bucket'), '--bucket'),
          ...(version === undefined ? {} : { version }),
          ...(snapshot === undefined ? {} : { snapshot }),
          ...(sub === undefined ? {} : { path: sub }),
          ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
        })
        .finally(() => progress.done());
      if (offlineSince !== null) {
        process.stderr.write(
          `canopy: ${offlineReason(offlineBecause)}; showing version ${versionId}, the active one as of ${new Date(offlineSince).toISOString()}\n`,
        );
      }
      out.print(
        table(
          entries.map((e) => [
            e.type === 'directory' ? 'dir' : e.type,
            e.mode === null ? '-' : e.mode.toString(8).padStart(4, '0'),
            String(e.size),
            e.mtime === null ? '-' : new Date(e.mtime * 1000).toISOString(),
            e.target === null
              ? JSON.stringify(e.name).slice(1, -1)
              : `${JSON.stringify(e.name).slice(1, -1)} -> ${e.target}`,
          ]),
        ),
        entries,
      );
      return;
    }
    case 'verify': {
      const version = str('version');
      const progress = progressShown({
        line: verifyProgressLine,
        ended: isVerifyEnd,
        phase: (p) => p.phase,
      });
      const result = await untilSignalled((signal) =>
        engine.verify({
          bucket: need(str('bucket'), '--bucket'),
          all: values['all'] === true,
          ...(version === undefined ? {} : { version }),
          ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
          signal,
        }),
      ).finally(() => progress.done());
      const asOf = new Date(result.verifiedAt).toISOString();
      const lost = result.unavailable.length;
      out.print(
        [
          ...(lost === 0
            ? [
                `verified ${result.checked} of ${counted(result.total, 'block')} (${counted(result.bytes, 'byte')}) of version ${result.versionId}: restorable as of ${asOf}`,
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
    case 'restore': {
      const snapshot = str('snapshot');
      const version = str('version');
      const to = str('to');
      const progress = progressShown({
        line: progressLine,
        ended: isPhaseEnd,
        phase: (p) => p.phase,
      });
      const result = await untilSignalled((signal) =>
        engine.restore({
          bucket: need(str('bucket'), '--bucket'),
          ...(to === undefined ? {} : { to }),
          overwrite: values['overwrite'] === true,
          ...(version === undefined ? {} : { version }),
          ...(snapshot === undefined ? {} : { snapshot }),
          ...(sub === undefined ? {} : { path: sub }),
          ...(progress.onProgress ? { onProgress: progress.onProgress } : {}),
          ...(values['sparse'] === true ? { sparse: true } : {}),
          signal,
        }),
      ).finally(() => progress.done());
      out.print(
        [
          ...(result.leftoversRemoved === 0
            ? []
            : [
                `removed ${counted(result.leftoversRemoved, 'unfinished file')} left by a restore that was stopped`,
              ]),
          ...(to === undefined ? [`into ${result.restoredInto}, where it was backed up from`] : []),
          `restored ${counted(result.files, 'file')} (${counted(result.bytes, 'byte')}), ${counted(result.directories, 'folder')}, ${counted(result.symlinks, 'symlink')}`,
          ...(result.alreadyThere === 0
            ? []
            : [
                result.alreadyThere === 1
                  ? 'already there with the same content, and left as it was: 1 file or link'
                  : `already there with the same content, and left as they were: ${result.alreadyThere} files and links`,
              ]),
          ...result.renamed.map((name) => `kept the existing file; restored as ${name}`),
          ...(result.modesNotKept === 0
            ? []
            : [
                result.modesNotKept === 1
                  ? "the disk would not take the permissions of 1 file or folder; it has the disk's own"
                  : `the disk would not take the permissions of ${result.modesNotKept} files and folders; they have the disk's own`,
              ]),
          ...result.notRestored.map((item) => `could not restore ${item.path}: ${item.reason}`),
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
    case 'account': {
      if ((sub ?? 'show') === 'show') {
        const user = await engine.getAccount();
        out.print(
          table([
            ['email', user.email ?? '-'],
            ['display name', user.display_name ?? '-'],
            ['locale', user.locale ?? '-'],
            ['egress this month', `${user.monthly_egress} bytes`],
          ]),
          user,
        );
        return;
      }
      if (sub !== 'set') throw new UsageError(`unknown account command: ${sub}`);
      const displayName = str('display-name');
      const locale = str('locale');
      if (displayName === undefined && locale === undefined)
        throw new UsageError('--display-name or --locale is required');
      const user = await engine.updateAccount({
        ...(displayName === undefined ? {} : { displayName }),
        ...(locale === undefined ? {} : { locale }),
      });
      out.print('account updated', user);
      return;
    }
    case 'invoices': {
      const invoices = await engine.listInvoices();
      out.print(
        invoices.length === 0
          ? 'no invoices'
          : table([
              ['ID', 'PERIOD', 'AMOUNT', 'STATUS'],
              ...invoices.map((i) => [
                i.id,
                `${i.billing_start.slice(0, 10)}..${i.billing_end.slice(0, 10)}`,
                `$${(i.total_amount / 100).toFixed(2)}`,
                i.status,
              ]),
            ]),
        invoices,
      );
      return;
    }
    case 'notifications': {
      if ((sub ?? 'list') === 'list') {
        const notes = await engine.listNotifications();
        out.print(
          notes.length === 0
            ? 'no notifications'
            : table([
                ['ID', 'SEVERITY', 'MESSAGE'],
                ...notes.map((n) => [n.id, n.severity, n.message]),
              ]),
          notes,
        );
        return;
      }
      if (sub !== 'dismiss') throw new UsageError(`unknown notifications command: ${sub}`);
      const id = need(rest[0], 'ID');
      await engine.dismissNotification(id);
      out.print(`dismissed ${id}`, { dismissed: id });
      return;
    }
    default:
      throw new UsageError(
        command === undefined ? 'a command is required' : `unknown command: ${command}`,
      );
  }
}

export async function main(argv: readonly string[]): Promise<number> {
  const out: Output = {
    json: argv.includes('--json'),
    print(human, data) {
      process.stdout.write(this.json ? `${JSON.stringify(data)}\n` : `${human}\n`);
    },
  };
  let engine: Engine | undefined;
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        json: { type: 'boolean' },
        server: { type: 'string' },
        code: { type: 'string' },
        name: { type: 'string' },
        local: { type: 'boolean' },
        data: { type: 'string' },
        type: { type: 'string' },
        class: { type: 'string' },
        'display-name': { type: 'string' },
        locale: { type: 'string' },
        bucket: { type: 'string' },
        version: { type: 'string' },
        to: { type: 'string' },
        overwrite: { type: 'boolean' },
        'dry-run': { type: 'boolean' },
        'allow-empty': { type: 'boolean' },
        'replace-source': { type: 'boolean' },
        'skip-check': { type: 'boolean' },
        add: { type: 'string', multiple: true },
        remove: { type: 'string', multiple: true },
        clear: { type: 'boolean' },
        progress: { type: 'boolean' },
        sparse: { type: 'boolean' },
        snapshot: { type: 'string' },
        all: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help === true || positionals.length === 0) {
      process.stdout.write(`${USAGE}\n`);
      return values.help === true ? 0 : 2;
    }
    const home = canopyHome();
    const { store, warning } = await openSecretStore(
      home,
      secretStoreChoice(process.env['CANOPY_SECRET_STORE']),
    );
    const warned = path.join(home, '.secret-file-warning-shown');
    if (warning !== null && !existsSync(warned)) {
      process.stderr.write(`${warning}\n`);
      mkdirSync(home, { recursive: true, mode: 0o700 });
      writeFileSync(warned, `${new Date().toISOString()}\n`);
    }
    // A damaged state database shows in the request that reads a damaged page; the engine
    // opened again rebuilds it, and the command runs once more, on the rebuilt one.
    for (let attempt = 1; ; attempt += 1) {
      try {
        engine = createEngine({
          home,
          secrets: store,
          startLocalService: async (...args) => {
            const service = await startLocalService(...args);
            if (service.restoredDatabase)
              process.stderr.write(`canopy: ${localDatabaseNotice(service.restoredDatabase)}\n`);
            return service;
          },
        });
        const repair = engine.stateRepair();
        if (repair)
          for (const line of stateRepairNotice(repair)) process.stderr.write(`canopy: ${line}\n`);
        return (await run(engine, positionals, values, out)) ?? 0;
      } catch (error) {
        if (attempt > 1) throw error;
        if (isEngineError(error, 'state_damaged'))
          process.stderr.write(
            `canopy: Canopy's state database was found damaged (${(error.cause as Error).message}); rebuilding it, then running the command again\n`,
          );
        else if (isEngineError(error, 'local_database_damaged'))
          process.stderr.write(
            'canopy: the database of the backups (service.sqlite) was found damaged on its disk; putting the copy Canopy keeps of it in its place, then running the command again\n',
          );
        else throw error;
        await engine?.close();
        engine = undefined;
      }
    }
  } catch (error) {
    if (
      error instanceof UsageError ||
      (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true
    ) {
      process.stderr.write(`canopy: ${(error as Error).message}\n`);
      return 2;
    }
    if (error instanceof StoppedBySignal) {
      process.stderr.write(`canopy: ${error.message}\n`);
      return error.exitCode;
    }
    if (error instanceof EngineError) {
      process.stderr.write(`canopy: ${error.message}\n`);
      return error.code === 'usage' ? 2 : 1;
    }
    process.stderr.write(
      `canopy: unexpected failure: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    return 1;
  } finally {
    await engine?.close();
  }
}
