import { accessSync, constants } from 'node:fs';
import { parseArgs } from 'node:util';
import { formatTime } from '../main/api/index.ts';
import { isParseError, parseErrorMessage } from '../main/command-line/index.ts';
import {
  AdminError,
  type AdminErrorCode,
  addUser,
  changeQuota,
  newEnrollmentCode,
  postNotification,
  recordInvoice,
} from './admin.ts';
import { createBucketService } from './app.ts';
import { checkStore } from './blocks/store-check.ts';
import { onReadOnlyDisk } from './read-only-disk.ts';
import { checkProgress } from './check-progress.ts';
import { storedBlockBytes } from './store/stored-blocks.ts';
import { checkReportLines, holdersOfProblems, notifyHolders } from './store-check-report.ts';
import { ServiceContext } from './context.ts';
import { defaultServerDataDir, holdsServiceData, SERVICE_DATABASE_FILE } from './data-dir.ts';
import { defaultServiceOptions } from './options.ts';
import { ListenError, listenError, type ListenErrorCode } from './listen-error.ts';

// canopy-server: run the Bucket Storage Service and administer its users.

const USAGE = `usage: canopy-server <command> [options]

commands:
  serve [--host 127.0.0.1] [--port 8750] [--public-url URL] [--log] [--no-rate-limits] [--cors-origin ORIGIN]...
  user add --email E [--quota BYTES]
  user quota --email E --quota BYTES|none
  enroll-code --email E
  invoice add --email E --start ISO --end ISO --amount CENTS --status paid|open|draft|uncollectible|void [--subscription ID]
  notify --email E --severity info|warning|error --message TEXT [--key KEY] [--sticky]
  check [--notify]    read back every stored block and metadata chunk and check it against its name

every command takes --data DIR (default: ${defaultServerDataDir()}) and --json`;

class UsageError extends Error {}

/** How a failed command is told: its exit status, and a stable code for a script (--json). */
interface CommandFailure {
  readonly status: number;
  readonly code: 'usage' | AdminErrorCode | ListenErrorCode | 'data_not_writable' | 'failed';
  readonly message: string;
}

function failureOf(error: unknown): CommandFailure {
  if (isParseError(error)) return { status: 2, code: 'usage', message: parseErrorMessage(error) };
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof UsageError) return { status: 2, code: 'usage', message };
  // Input the command cannot take is a usage error too; a user who is not there, or is already,
  // is the data folder's answer to a well-formed command.
  if (error instanceof AdminError)
    return { status: error.code === 'invalid_input' ? 2 : 1, code: error.code, message };
  if (error instanceof ListenError) return { status: 1, code: error.code, message };
  // The data folder is the only place the commands write.
  const { code, path: failedPath } = error as NodeJS.ErrnoException;
  if ((code === 'EACCES' || code === 'EPERM') && failedPath !== undefined)
    return {
      status: 1,
      code: 'data_not_writable',
      message: `cannot write in ${failedPath}: permission denied; choose a data folder this user may write with --data`,
    };
  return { status: 1, code: 'failed', message };
}

type Output = (human: string, json: Record<string, unknown>) => void;

function requireString(value: string | boolean | undefined, flag: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new UsageError(`${flag} is required`);
  return value;
}

function parseBytes(value: string, flag: string): number | null {
  if (value === 'none') return null;
  const bytes = Number(value);
  if (!Number.isSafeInteger(bytes) || bytes < 0)
    throw new UsageError(`${flag} must be a whole number of bytes`);
  return bytes;
}

function parseIso(value: string, flag: string): number {
  const ms = Date.parse(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(ms))
    throw new UsageError(`${flag} must be an ISO date`);
  return ms;
}

async function serve(
  dataDir: string,
  values: Record<string, string | boolean | string[] | undefined>,
  print: Output,
): Promise<number> {
  const host = typeof values['host'] === 'string' ? values['host'] : '127.0.0.1';
  const port = Number(values['port'] ?? 8750);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new UsageError('--port must be 0-65535');
  const publicUrl =
    typeof values['public-url'] === 'string' ? values['public-url'].replace(/\/+$/, '') : undefined;
  const isLoopback = host === 'localhost' || host === '::1' || host.startsWith('127.');
  if (!isLoopback && !publicUrl?.startsWith('https://')) {
    process.stderr.write(
      'warning: serving on a non-loopback address; clients require HTTPS there, so put a TLS proxy in front and pass --public-url https://…\n',
    );
  }
  const noLimits = values['no-rate-limits'] === true;
  const options = {
    ...defaultServiceOptions(dataDir),
    logRequests: values['log'] === true,
    // Without the request log, what went wrong still reaches the operator.
    ...(values['log'] === true
      ? {}
      : { problemLog: (line: string) => process.stderr.write(`${line}\n`) }),
    // For benchmarks and trusted networks only: §14 lets every limit be disabled.
    ...(noLimits ? { credentialRateLimit: null, ipRateLimit: null } : {}),
    corsOrigins: Array.isArray(values['cors-origin']) ? values['cors-origin'] : [],
  };
  const service = createBucketService(
    publicUrl === undefined ? options : { ...options, publicUrl },
  );
  let url: string;
  try {
    url = await service.listen(host, port);
  } catch (error) {
    await service.close();
    throw listenError(error, host, port);
  }
  // Handlers first: a supervisor may signal as soon as it reads the line below.
  const stopped = new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve();
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  print(`listening on ${url}`, { listening: url, data: dataDir });
  await stopped;
  await service.close();
  return 0;
}

const RUN_AS_OWNER = 'run canopy-server check as the user that runs serve, who owns the data';

/**
 * Refuses a check by a user who may not write the data folder (an administrator's own account,
 * the data being a service user's): its database would open for reading only where `serve`
 * writes, and the packs are their owner's alone. A disk mounted read-only is checked from a copy.
 */
function refuseOtherUsersCheck(dataDir: string): void {
  try {
    accessSync(dataDir, constants.W_OK);
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException;
    if (code === 'EACCES' || code === 'EPERM')
      throw new Error(`this user may not write in ${dataDir}: ${RUN_AS_OWNER}`, { cause: error });
    // Not there (told next, as a folder holding no data), or on a read-only disk.
  }
}

/** What to say of a file of the data this user may not read; undefined for other failures. */
function unreadableByThisUser(error: unknown): string | undefined {
  const { code, path: file } = error as NodeJS.ErrnoException;
  if ((code !== 'EACCES' && code !== 'EPERM') || file === undefined) return undefined;
  return `cannot read ${file}: permission denied; ${RUN_AS_OWNER}`;
}

/** `check`: exits 1 when some block or metadata chunk is not whole. */
async function check(
  dataDir: string,
  notify: boolean,
  json: boolean,
  print: Output,
): Promise<number> {
  refuseOtherUsersCheck(dataDir);
  // A folder mistyped, or an external disk not mounted, would be made anew and found all whole.
  if (!holdsServiceData(dataDir))
    throw new Error(
      `${dataDir} holds no data of a Canopy server (no ${SERVICE_DATABASE_FILE}): give its data folder with --data; an external disk must be mounted`,
    );
  // A disk the system mounted read-only after it was pulled out is one to check: its database
  // is read from a copy (ServiceOptions.readOnly).
  const readOnly = onReadOnlyDisk(dataDir);
  if (readOnly && notify)
    throw new Error(
      `${dataDir} is on a disk mounted read-only, where --notify cannot leave notifications: check without it, or mount the disk writable`,
    );
  const ctx = new ServiceContext({ ...defaultServiceOptions(dataDir), readOnly });
  try {
    const started = performance.now();
    const progress =
      process.stderr.isTTY && !json
        ? checkProgress(storedBlockBytes(ctx.db), (text) => process.stderr.write(text))
        : undefined;
    let checked;
    try {
      checked = await checkStore(ctx, progress?.onProgress);
    } catch (error) {
      const unreadable = unreadableByThisUser(error);
      if (unreadable === undefined) throw error;
      throw new Error(unreadable, { cause: error });
    } finally {
      progress?.done();
    }
    const seconds = (performance.now() - started) / 1000;
    const holders = holdersOfProblems(ctx, checked);
    if (notify) notifyHolders(ctx, holders);
    const whole = checked.problems.length === 0 && checked.chunkProblems.size === 0;
    print(checkReportLines(checked, seconds, holders, notify).join('\n'), {
      whole,
      blocks: checked.blocks,
      bytes: checked.bytes,
      metadata_chunks: checked.chunks,
      metadata_bytes: checked.chunkBytes,
      seconds,
      problems: checked.problems,
      metadata_problems: [...checked.chunkProblems].map(([file, chunks]) => ({ file, chunks })),
      holders: holders.map(({ email, blocks }) => ({ email, blocks })),
      notified: notify ? holders.map(({ email }) => email) : [],
    });
    return whole ? 0 : 1;
  } finally {
    ctx.close();
  }
}

function withContext<T>(dataDir: string, work: (ctx: ServiceContext) => T): T {
  const ctx = new ServiceContext(defaultServiceOptions(dataDir));
  try {
    return work(ctx);
  } finally {
    ctx.close();
  }
}

export async function main(argv: readonly string[]): Promise<number> {
  let json = false;
  const print: Output = (human, data) => {
    process.stdout.write(json ? `${JSON.stringify(data)}\n` : `${human}\n`);
  };
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        data: { type: 'string' },
        json: { type: 'boolean' },
        host: { type: 'string' },
        port: { type: 'string' },
        'public-url': { type: 'string' },
        log: { type: 'boolean' },
        'no-rate-limits': { type: 'boolean' },
        'cors-origin': { type: 'string', multiple: true },
        email: { type: 'string' },
        quota: { type: 'string' },
        start: { type: 'string' },
        end: { type: 'string' },
        amount: { type: 'string' },
        status: { type: 'string' },
        subscription: { type: 'string' },
        severity: { type: 'string' },
        message: { type: 'string' },
        key: { type: 'string' },
        sticky: { type: 'boolean' },
        notify: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    json = values.json === true;
    const dataDir = values.data ?? defaultServerDataDir();
    const command = positionals.join(' ');
    // No command: the help for a person, a usage failure for a script.
    if (values.help !== true && command === '' && json)
      throw new UsageError('a command is required');
    if (values.help === true || command === '') {
      process.stdout.write(`${USAGE}\n`);
      return values.help === true ? 0 : 2;
    }
    switch (command) {
      case 'serve':
        return await serve(dataDir, values, print);
      case 'user add': {
        const email = requireString(values.email, '--email');
        const quota = values.quota === undefined ? null : parseBytes(values.quota, '--quota');
        const result = withContext(dataDir, (ctx) => addUser(ctx, email, quota));
        print(
          `user ${result.userId}\nenrollment code ${result.code} (valid until ${formatTime(result.expiresAt)})`,
          {
            user_id: result.userId,
            code: result.code,
            expires_at: Math.floor(result.expiresAt / 1000),
          },
        );
        return 0;
      }
      case 'user quota': {
        const email = requireString(values.email, '--email');
        const quota = parseBytes(requireString(values.quota, '--quota'), '--quota');
        withContext(dataDir, (ctx) => changeQuota(ctx, email, quota));
        print(`quota of ${email} set to ${quota === null ? 'none' : `${quota} bytes`}`, {
          email,
          quota,
        });
        return 0;
      }
      case 'enroll-code': {
        const email = requireString(values.email, '--email');
        const result = withContext(dataDir, (ctx) => newEnrollmentCode(ctx, email));
        print(`enrollment code ${result.code} (valid until ${formatTime(result.expiresAt)})`, {
          user_id: result.userId,
          code: result.code,
          expires_at: Math.floor(result.expiresAt / 1000),
        });
        return 0;
      }
      case 'invoice add': {
        const amount = Number(requireString(values.amount, '--amount'));
        if (!Number.isSafeInteger(amount) || amount < 0)
          throw new UsageError('--amount must be whole cents');
        const input = {
          email: requireString(values.email, '--email'),
          start: parseIso(requireString(values.start, '--start'), '--start'),
          end: parseIso(requireString(values.end, '--end'), '--end'),
          amount,
          status: requireString(values.status, '--status'),
          subscriptionId: values.subscription ?? null,
        };
        const id = withContext(dataDir, (ctx) => recordInvoice(ctx, input));
        print(`invoice ${id}`, { id });
        return 0;
      }
      case 'notify': {
        const input = {
          email: requireString(values.email, '--email'),
          severity: requireString(values.severity, '--severity'),
          message: requireString(values.message, '--message'),
          key: values.key ?? 'admin_message',
          sticky: values.sticky === true,
        };
        const id = withContext(dataDir, (ctx) => postNotification(ctx, input));
        print(`notification ${id}`, { id });
        return 0;
      }
      case 'check':
        return await check(dataDir, values['notify'] === true, json, print);
      default:
        throw new UsageError(`unknown command: ${command}`);
    }
  } catch (error) {
    const failure = failureOf(error);
    if (argv.includes('--json'))
      process.stderr.write(
        `${JSON.stringify({ error: { code: failure.code, message: failure.message } })}\n`,
      );
    else
      process.stderr.write(
        `canopy-server: ${failure.message}\n${failure.code === 'usage' ? `${USAGE}\n` : ''}`,
      );
    return failure.status;
  }
}
