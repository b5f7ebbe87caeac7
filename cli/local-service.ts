import {
  lstatSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { EngineError } from '../main/api/index.ts';
import { localDatabaseDamaged, type LocalService } from '../main/index.ts';
import { enrollmentCodeCreatingUser } from '../server/admin.ts';
import { createBucketService, type BucketService } from '../server/app.ts';
import { onReadOnlyDisk } from '../server/read-only-disk.ts';
import { holdsServiceData } from '../server/data-dir.ts';
import { isDamagedDatabase } from '../server/store/damaged-database.ts';
import { defaultServiceOptions } from '../server/options.ts';

// Canopy's embedded Bucket Storage Service for one data folder (this computer or an external
// disk), on a free loopback port, in this process. No account is needed: the folder has one
// local user, and each device enrolls with a fresh code.
//
// It runs on the engine's own thread. A worker thread of its own was tried three times: backup
// and restore were no faster, first because the disk was the limit and later because the two
// cores were, and the second JavaScript heap cost 60-100 MB of peak memory.
//
// The engine's own requests go through a Unix socket beside the port, in a folder of this
// user's only: every byte of a backup and a restore crosses the connection, both of its ends
// run on the engine's thread, and loopback TCP cost that thread about two thirds more than a
// Unix socket (1.2 GiB through one in 670 ms of CPU against 400 ms on the machine we measured).
// Where no socket can be made (no writable temporary folder, or its path is too long for
// one), the port serves alone, as it does any other client.
//
// The folder is removed when the service closes. A process killed outright (kill -9, a power
// cut) leaves it behind: the folder's name holds the process id, and the next start removes
// such folders of this user whose process is gone.

export const LOCAL_USER_EMAIL = 'local@canopy.invalid';

/**
 * How long closing may spend freeing what deletions left (ServiceContext.tidy): a command runs
 * a few seconds at most past its work, and what is left, the next command goes on with.
 */
const TIDY_BUDGET_MS = 2_000;

const SOCKET_FOLDER_PREFIX = 'canopy-service-';
/** A socket folder's name: the prefix, the process id, and mkdtemp's random end. */
const SOCKET_FOLDER = new RegExp(`^${SOCKET_FOLDER_PREFIX}(\\d+)-[A-Za-z0-9]{6}$`);

/** Whether process `pid` is running (as any user). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes socket folders in `tmp` that this user's processes left when they were killed. Only
 * folders of this user whose process is gone: another user's, or a running Canopy's, stay.
 */
function removeLeftSocketFolders(tmp: string): void {
  let names: string[];
  try {
    names = readdirSync(tmp);
  } catch {
    // No temporary folder to list: no socket is made there either (see below).
    return;
  }
  const uid = process.getuid?.();
  for (const name of names) {
    const pid = Number(SOCKET_FOLDER.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isSafeInteger(pid) || pid === process.pid || isRunning(pid)) continue;
    const folder = path.join(tmp, name);
    const stats = lstatSync(folder, { throwIfNoEntry: false });
    if (!stats?.isDirectory() || (uid !== undefined && stats.uid !== uid)) continue;
    try {
      // force: another Canopy starting at the same moment may have removed it first.
      rmSync(folder, { recursive: true, force: true });
    } catch {
      // Tidying up after another process is no reason not to start: a folder that cannot be
      // removed now is tried again at the next start.
    }
  }
}

/**
 * A fresh folder of this process's own in the temporary folder, for the socket and, on a
 * read-only disk, the copy of the service's database; undefined where none can be made.
 */
function makePrivateFolder(): string | undefined {
  const tmp = os.tmpdir();
  removeLeftSocketFolders(tmp);
  try {
    // mkdtemp makes the folder 0700: no other user can reach the socket inside.
    return mkdtempSync(path.join(tmp, `${SOCKET_FOLDER_PREFIX}${process.pid}-`));
  } catch {
    return undefined;
  }
}

/** The socket in `folder`; undefined, with nothing left behind, where it fails. */
async function listenOnSocketIn(
  service: BucketService,
  folder: string,
): Promise<string | undefined> {
  const socketPath = path.join(folder, 'service.sock');
  try {
    await service.listenOnSocket(socketPath);
    return socketPath;
  } catch {
    return undefined;
  }
}

/**
 * The service on `dataDir`. Without `create`, the folder must hold a service's data already:
 * where it is missing or empty (an external disk not plugged in), nothing is made there, so
 * that the disk can still be mounted and the device still finds its backups once it is back.
 * `observe` lets tests watch the requests the service receives.
 */
export async function startLocalService(
  dataDir: string,
  options: { readonly create: boolean } = { create: true },
  observe?: (app: FastifyInstance) => void,
): Promise<LocalService> {
  if (!options.create && !holdsServiceData(dataDir)) {
    throw new EngineError(
      'local_data_missing',
      `the backups of this device are not in ${dataDir}: if they are on an external disk, connect it and try again (mounted at another place now, they are found there after \`canopy logout\` and \`canopy login --local --data\` that place)`,
    );
  }
  const readOnly = onReadOnlyDisk(dataDir);
  if (readOnly && options.create) {
    throw new EngineError(
      'local_server',
      `${dataDir} is on a disk mounted read-only, so Canopy cannot keep backups there: mount it writable (after checking it for errors) and try again`,
    );
  }
  const folder = makePrivateFolder();
  const removeFolder = (): void => {
    if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
  };
  let service: BucketService;
  try {
    service = createBucketService({
      ...defaultServiceOptions(dataDir),
      readOnly,
      // In the folder the next start removes if this process is killed: the copy may be large.
      ...(readOnly && folder !== undefined ? { readOnlyCopyDir: folder } : {}),
    });
  } catch (error) {
    removeFolder();
    // Damaged beyond opening, with no copy kept to put in its place (server/app.ts).
    throw isDamagedDatabase(error) ? localDatabaseDamaged(dataDir, error) : error;
  }
  // Freeing room after a deletion failed (ServiceContext.housekeep, tidy): the command's own
  // work is done, so this is a line on stderr among the command's own, not a Node warning.
  service.ctx.onHousekeepingFailure = (error, what) => {
    process.stderr.write(
      `canopy: the local service could not ${what}, and tries again at the next command: ${error instanceof Error ? error.message : String(error)}\n`,
    );
  };
  let url: string;
  let socketPath: string | undefined;
  /** The mount the service opened its files on: a disk plugged in again is another mount. */
  let openedOn: number;
  try {
    openedOn = statSync(dataDir).dev;
    observe?.(service.app);
    url = await service.listen('127.0.0.1', 0);
    socketPath = folder === undefined ? undefined : await listenOnSocketIn(service, folder);
  } catch (error) {
    try {
      await service.close();
    } finally {
      removeFolder();
    }
    throw error;
  }
  const matchesDisk = (): boolean => {
    try {
      const now = statSync(dataDir, { throwIfNoEntry: false });
      return (
        now?.dev === openedOn && holdsServiceData(dataDir) && onReadOnlyDisk(dataDir) === readOnly
      );
    } catch {
      // A folder that cannot even be looked at (EIO, ENOTCONN) is not the one opened.
      return false;
    }
  };
  return {
    url,
    readOnly,
    ...(socketPath === undefined ? {} : { socketPath }),
    ...(service.restoredDatabase ? { restoredDatabase: service.restoredDatabase } : {}),
    matchesDisk,
    enrollmentCode: () =>
      Promise.resolve(enrollmentCodeCreatingUser(service.ctx, LOCAL_USER_EMAIL).code),
    holdsData: () => {
      try {
        return holdsServiceData(dataDir);
      } catch {
        // A folder that cannot even be looked at (EIO from a failing disk) holds nothing the
        // service can use either.
        return false;
      }
    },
    close: async () => {
      try {
        // Not on a disk pulled out meanwhile: each step would only fail, and say so.
        if (matchesDisk()) await service.ctx.tidy(TIDY_BUDGET_MS);
        await service.close();
      } finally {
        removeFolder();
      }
    },
  };
}
