import { loadKeyPair, TokenMinter, type KeyPair } from '../identity/index.ts';
import type { Dispatcher } from 'undici';
import { EngineError } from '../api/index.ts';
import {
  ServerClock,
  ServiceClient,
  ServiceOutage,
  socketDispatcher,
  type RetryPolicy,
  type ServiceWait,
} from '../service/index.ts';
import { readAccount, type AccountRecord, type StateDb } from '../state/index.ts';
import type { EngineDeps, LocalService } from './engine-deps.ts';
import { missingDeviceKey } from './missing-device-key.ts';
import { unusableFolderError } from './unusable-folder.ts';

// How the engine reaches the service its device is enrolled with: a client signed with the
// device key, the embedded service started on demand for a device enrolled with it (and
// started anew once its disk came back as another mount), and the one set of connections to
// that service's socket that every client shares.

/** `client`, its requests stopped by `signal` when one is given. */
function stoppedBy(client: ServiceClient, signal: AbortSignal | undefined): ServiceClient {
  return signal ? client.stoppedBy(signal) : client;
}

/** How long a request of an operation under way is tried through an outage (service-outage.ts). */
export const OUTAGE_BUDGET_MS = 10 * 60_000;

/** What connect does for an operation that rides out outages of the service. */
export interface OutageRiding {
  /** Told once as the operation starts to wait, and once it reached the service again. */
  readonly onWait?: ((wait: ServiceWait) => void) | undefined;
}

export class ServiceConnection {
  /**
   * The service's clock, as its answers show it: device tokens are dated by it, and uploads
   * time their windows by it, whatever this computer's clock says.
   */
  private readonly serverClock: ServerClock;
  private local: LocalService | undefined;
  /** The client of the enrolled account, with the device key it signs with. */
  private connected:
    | {
        readonly client: ServiceClient;
        readonly account: AccountRecord;
        readonly server: string;
        readonly key: KeyPair;
      }
    | undefined;
  /**
   * The connections to the embedded service's socket, which every client of this engine shares,
   * and which close before the service does: after a request was cut off (a stopped backup),
   * undici opens a fresh connection that never carries a request, and the service, which waits
   * for its connections when it closes, waited 2 s (its grace period) for it.
   */
  private localConnections:
    { readonly socketPath: string; readonly dispatcher: Dispatcher } | undefined;

  constructor(
    private readonly deps: EngineDeps,
    private readonly db: StateDb,
    now: () => number,
  ) {
    this.serverClock = new ServerClock(now);
  }

  /** The embedded service while it runs; undefined before it was needed, and once closed. */
  get localService(): LocalService | undefined {
    return this.local;
  }

  /**
   * A client of the service at `baseUrl`, signing as `userId` with `key` when both are given
   * (anonymous otherwise). Its requests to the embedded service go through that service's
   * socket, on the shared connections.
   */
  client(
    baseUrl: string,
    key?: KeyPair,
    userId?: string,
    retry: RetryPolicy | undefined = this.deps.retry,
  ): ServiceClient {
    const minter =
      key && userId !== undefined
        ? new TokenMinter(key, userId, () => this.serverClock.now())
        : undefined;
    // The embedded service's own socket, for requests to it (cli/local-service.ts).
    const socketPath = baseUrl === this.local?.url ? this.local.socketPath : undefined;
    return new ServiceClient(
      {
        baseUrl,
        ...(minter ? { deviceToken: () => minter.token() } : {}),
        ...(retry ? { retry } : {}),
        serverClock: this.serverClock,
        ...(socketPath === undefined ? {} : { socketPath }),
      },
      socketPath === undefined ? undefined : this.socketConnections(baseUrl, socketPath),
    );
  }

  private socketConnections(baseUrl: string, socketPath: string): Dispatcher {
    if (this.localConnections?.socketPath !== socketPath)
      this.localConnections = { socketPath, dispatcher: socketDispatcher(baseUrl, socketPath) };
    return this.localConnections.dispatcher;
  }

  /** Closes the connections to the embedded service, at once: its requests are over. */
  private async closeLocalConnections(): Promise<void> {
    const connections = this.localConnections;
    this.localConnections = undefined;
    await connections?.dispatcher.destroy();
  }

  /**
   * The embedded service on `dataDir`. Only `login --local` creates one (`create`): for a device
   * enrolled already, a missing or empty folder is its disk not plugged in, and a new service
   * there would not know the device and would fill the disk's mount point.
   */
  async startLocal(dataDir: string, create: boolean): Promise<LocalService> {
    if (this.local?.matchesDisk?.() === false) {
      // Its disk went, or came back as another mount: what it has open is gone with the old one.
      const stale = this.local;
      this.local = undefined;
      try {
        await this.closeLocalConnections();
        await stale.close();
      } catch {
        // Closing files on a disk that is gone can fail; nothing of them is needed any more.
      }
    }
    if (this.local) return this.local;
    if (!this.deps.startLocalService) {
      throw new EngineError('local_server', 'this host cannot run the local storage service');
    }
    try {
      this.local = await this.deps.startLocalService(dataDir, { create });
    } catch (error) {
      if (error instanceof EngineError) throw error;
      const unusable = unusableFolderError(error, dataDir, 'where the backups are kept');
      if (unusable !== error) throw unusable;
      const detail = error instanceof Error ? error.message : String(error);
      throw new EngineError(
        'local_server',
        `the local storage service in ${dataDir} could not start: ${detail}`,
        { cause: error },
      );
    }
    return this.local;
  }

  /**
   * The enrolled account and a client signed with its device key; its requests are stopped by
   * `signal` when one is given.
   */
  async connect(
    options: {
      retry?: RetryPolicy;
      signal?: AbortSignal | undefined;
      /**
       * For an operation that runs a while (a backup, a restore, a verify): its requests ride
       * out an outage of a service on the network once it reached it. The embedded service has
       * none to ride out: it stops only with this process, or with its disk, which is told at
       * once (disk-gone-error.ts).
       */
      ridingOutOutages?: OutageRiding;
    } = {},
  ): Promise<{
    client: ServiceClient;
    account: AccountRecord;
    server: string;
  }> {
    const account = readAccount(this.db);
    if (!account)
      throw new EngineError(
        'not_logged_in',
        'this device is not logged in; run `canopy login` first',
      );
    const server =
      account.mode === 'local'
        ? (await this.startLocal(account.local_data_dir ?? '', false)).url
        : (account.server_url ?? '');
    // The same enrollment, reached at the same address (the embedded service listens anew on
    // each start): its client and key, so the key is not read from the keychain again.
    const connected = this.connected;
    if (
      connected?.server === server &&
      JSON.stringify(connected.account) === JSON.stringify(account)
    ) {
      const client = options.retry
        ? this.client(server, connected.key, account.user_id, options.retry)
        : connected.client;
      return { client: this.operationClient(client, account, options), account, server };
    }
    const key = await loadKeyPair(this.deps.secrets, account.device_key_account);
    if (!key) throw missingDeviceKey(this.deps.secrets);
    this.connected = { client: this.client(server, key, account.user_id), account, server, key };
    const client = options.retry
      ? this.client(server, key, account.user_id, options.retry)
      : this.connected.client;
    return { client: this.operationClient(client, account, options), account, server };
  }

  /** `client` as one operation uses it: stopped by its signal, riding out outages if asked. */
  private operationClient(
    client: ServiceClient,
    account: AccountRecord,
    options: { signal?: AbortSignal | undefined; ridingOutOutages?: OutageRiding },
  ): ServiceClient {
    const riding = options.ridingOutOutages;
    const outage =
      riding && account.mode !== 'local'
        ? new ServiceOutage(this.deps.outageBudgetMs ?? OUTAGE_BUDGET_MS, Date.now, riding.onWait)
        : undefined;
    return stoppedBy(outage ? client.ridingOutOutages(outage) : client, options.signal);
  }

  /** Forgets the enrolled account's client: the account was logged out. */
  forgetAccount(): void {
    this.connected = undefined;
  }

  /** Closes the connections to the embedded service, then the service. */
  async close(): Promise<void> {
    this.connected = undefined;
    await this.closeLocalConnections();
    const local = this.local;
    this.local = undefined;
    await local?.close();
  }
}
