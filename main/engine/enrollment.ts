import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EngineError, isEngineError, type EngineErrorCode } from '../api/index.ts';
import { loadKeyPair, loadOrCreateKeyPair, type KeyPair } from '../identity/index.ts';
import { AnswerCutError, type ServiceClient, watchSentAgain } from '../service/index.ts';
import {
  forgetAccount,
  homeId,
  readAccount,
  writeAccount,
  type AccountRecord,
  type StateDb,
} from '../state/index.ts';
import type { EngineDeps } from './engine-deps.ts';
import type { ServiceConnection } from './service-connection.ts';
import { NO_RETRY, UNREACHABLE } from './unreachable.ts';
import { absolutePath } from './absolute-path.ts';

// Enrolling this device with a service (an enrollment code, the embedded service, or another
// device's approval), the account it is enrolled with, and logging out. A device key is made
// once per Canopy home and kept in the secret store; the account record names it.

export interface AccountSummary {
  readonly mode: 'remote' | 'local';
  readonly server: string;
  readonly userId: string;
  readonly keyId: string;
  readonly fingerprint: string;
  readonly email: string | null;
  readonly deviceName: string | null;
  readonly secretStore: 'keychain' | 'file';
}

export interface LinkWaiting {
  readonly fingerprint: string;
  readonly pem: string;
}

/** What `link` is asked: the server, and whom to tell the key to approve. */
export interface LinkRequest {
  readonly server: string;
  readonly deviceName?: string;
  readonly onWaiting: (waiting: LinkWaiting) => void;
  /** How long to wait for the approval; 15 minutes by default. */
  readonly timeoutMs?: number;
}

export class Enrollment {
  constructor(
    private readonly deps: EngineDeps,
    private readonly db: StateDb,
    private readonly connection: ServiceConnection,
    private readonly now: () => number,
  ) {}

  private deviceKeyAccount(): string {
    return `device-key:${homeId(this.db)}`;
  }

  private summary(account: AccountRecord, server: string): AccountSummary {
    return {
      mode: account.mode,
      server,
      userId: account.user_id,
      keyId: account.key_id,
      fingerprint: account.fingerprint,
      email: account.email,
      deviceName: account.device_name,
      secretStore:
        this.deps.secrets.kindHolding?.(account.device_key_account) ?? this.deps.secrets.kind,
    };
  }

  /**
   * Refuses to enroll a home enrolled already, unless its device key is gone from the secret
   * store (the user removed it from the keychain): that enrollment can sign nothing any more,
   * and logging in again replaces it.
   */
  private async refuseIfEnrolled(): Promise<void> {
    const account = readAccount(this.db);
    if (account && (await this.deps.secrets.get(account.device_key_account)) !== null) {
      const where =
        account.mode === 'local' ? `this computer (${account.local_data_dir})` : account.server_url;
      throw new EngineError(
        'already_logged_in',
        `this Canopy home is already enrolled with ${where}; run \`canopy logout\` first to enroll it anew`,
      );
    }
  }

  private async enrollWith(
    server: string,
    code: string,
    deviceName: string | undefined,
    mode: 'remote' | 'local',
    localDataDir: string | null,
  ): Promise<AccountSummary> {
    const keyAccount = this.deviceKeyAccount();
    // A key kept from before, with no account, is from an enrollment that did not finish: one
    // whose answer was lost, and its process with it, may have registered it.
    const keptKey = await loadKeyPair(this.deps.secrets, keyAccount);
    let key = keptKey ?? (await loadOrCreateKeyPair(this.deps.secrets, keyAccount));
    const anonymous = this.connection.client(server);
    let enrolled;
    try {
      enrolled = await this.enrollOrFind(anonymous, code, key, deviceName, keptKey !== null);
    } catch (error) {
      // Refused, the key is not registered by this code: it goes, so that the next login (the
      // code typed again) does not take it for one a lost answer may have registered, and wait
      // for the server to say it is not.
      if (isEngineError(error, 'enrollment_refused')) await this.deps.secrets.delete(keyAccount);
      throw error;
    }
    if (enrolled === 'key taken') {
      // The key is registered, and not with this code, which the server would have refused as
      // used (§8.1: the code is checked first): `canopy link` that did not finish, or a login
      // with another code. The code is unused, and a new key enrolls with it; the old one is
      // listed among its account's devices.
      await this.deps.secrets.delete(keyAccount);
      key = await loadOrCreateKeyPair(this.deps.secrets, keyAccount);
      enrolled = await this.enrollOrFind(anonymous, code, key, deviceName, false);
      if (enrolled === 'key taken')
        throw new EngineError('conflict', 'the server holds the new device key already');
    }
    const who = await this.connection.client(server, key, enrolled.user_id).whoAmI();
    const account: AccountRecord = {
      mode,
      server_url: mode === 'remote' ? server : null,
      local_data_dir: localDataDir,
      user_id: who.user_id,
      key_id: who.key_id,
      fingerprint: who.fingerprint,
      email: who.email,
      device_name: deviceName ?? null,
      device_key_account: keyAccount,
      enrolled_at: this.now(),
    };
    writeAccount(this.db, account);
    return this.summary(account, server);
  }

  /**
   * Enrolls `key` with `code`, and gives its user's id; 'key taken' when the server holds the
   * key already. When the code may have been used by this key (the answer broke off; a request
   * sent again, or one with a `keptKey`, was refused), the server is asked whether the key is
   * registered (regwait, §8.3, which answers at once for a key registered in the last minutes):
   * a login whose answer a flaky network dropped is then done, rather than its code spent and
   * the user stuck with a key no code can enroll.
   */
  private async enrollOrFind(
    anonymous: ServiceClient,
    code: string,
    key: KeyPair,
    deviceName: string | undefined,
    keptKey: boolean,
  ): Promise<{ user_id: string } | 'key taken'> {
    const sentAgain = watchSentAgain();
    try {
      return await anonymous.enroll(
        { code, pem: key.pem, ...(deviceName === undefined ? {} : { deviceName }) },
        sentAgain,
      );
    } catch (error) {
      const refused = error instanceof EngineError && error.code === 'not_authorized';
      const taken = error instanceof EngineError && error.code === 'conflict';
      if (taken) return 'key taken';
      if (error instanceof AnswerCutError || (refused && (sentAgain.happened() || keptKey))) {
        const userId = await anonymous.pollRegistration(key.fingerprint);
        if (userId !== null) return { user_id: userId };
      }
      if (refused)
        throw new EngineError(
          'enrollment_refused',
          'server refused the enrollment code (expired, used or unknown)',
          { cause: error },
        );
      throw error;
    }
  }

  async login(input: {
    server: string;
    code: string;
    deviceName?: string;
  }): Promise<AccountSummary> {
    await this.refuseIfEnrolled();
    const server = this.connection.client(input.server).baseUrl;
    return this.enrollWith(server, input.code, input.deviceName, 'remote', null);
  }

  /** Backs up to this computer: starts the embedded service and enrolls this device with it. */
  async loginLocal(input: { dataDir?: string; deviceName?: string }): Promise<AccountSummary> {
    await this.refuseIfEnrolled();
    const dataDir = absolutePath(
      input.dataDir ?? this.deps.defaultLocalDataDir ?? path.join(this.deps.home, 'local-server'),
    );
    const local = await this.connection.startLocal(dataDir, true);
    const code = await local.enrollmentCode();
    return this.enrollWith(local.url, code, input.deviceName ?? os.hostname(), 'local', dataDir);
  }

  /**
   * Links this device by regwait (§8.3): creates its key, reports the fingerprint and PEM, and
   * polls until another device registers the key. The caller must show the returned email
   * and get the user's confirmation before the first backup (§16.13).
   */
  async link(input: LinkRequest): Promise<AccountSummary> {
    await this.refuseIfEnrolled();
    const server = this.connection.client(input.server).baseUrl;
    const keyAccount = this.deviceKeyAccount();
    const key = await loadOrCreateKeyPair(this.deps.secrets, keyAccount);
    input.onWaiting({ fingerprint: key.fingerprint, pem: key.pem });
    const anonymous = this.connection.client(server);
    const deadline = this.now() + (input.timeoutMs ?? 15 * 60_000);
    let userId: string | null = null;
    while (userId === null) {
      userId = await anonymous.pollRegistration(key.fingerprint);
      if (userId === null && this.now() >= deadline) {
        throw new EngineError(
          'timeout',
          'no device approved this one in time; run `canopy link` again',
        );
      }
      // The service holds each poll; a short pause keeps a fast-failing server from spinning.
      if (userId === null) await sleep(200);
    }
    const who = await this.connection.client(server, key, userId).whoAmI();
    const account: AccountRecord = {
      mode: 'remote',
      server_url: server,
      local_data_dir: null,
      user_id: who.user_id,
      key_id: who.key_id,
      fingerprint: who.fingerprint,
      email: who.email,
      device_name: input.deviceName ?? null,
      device_key_account: keyAccount,
      enrolled_at: this.now(),
    };
    writeAccount(this.db, account);
    return this.summary(account, server);
  }

  /**
   * The account as the service tells it. While the service cannot be reached (offline, or the
   * disk holding the backups unplugged), the account as this device enrolled it, without the
   * storage host, and why (`offlineBecause`): which account a device is on is no less true then.
   */
  async whoami(): Promise<
    AccountSummary & { storageHost: string | null; offlineBecause: EngineErrorCode | null }
  > {
    try {
      // One attempt, no backoff: the enrolled account is shown instead of waiting.
      const { client, account, server } = await this.connection.connect({ retry: NO_RETRY });
      const who = await client.whoAmI();
      return {
        ...this.summary({ ...account, email: who.email }, server),
        storageHost: who.storage_host,
        offlineBecause: null,
      };
    } catch (error) {
      const account = readAccount(this.db);
      if (!account || !(error instanceof EngineError) || !UNREACHABLE.has(error.code)) throw error;
      // The embedded service's address is made when it starts; its data folder is where it is.
      const server =
        account.mode === 'local' ? (account.local_data_dir ?? '') : (account.server_url ?? '');
      return { ...this.summary(account, server), storageHost: null, offlineBecause: error.code };
    }
  }

  /** Forgets the account locally and deletes this device's key. */
  async logout(): Promise<void> {
    const account = readAccount(this.db);
    if (!account) throw new EngineError('not_logged_in', 'this device is not logged in');
    forgetAccount(this.db);
    await this.deps.secrets.delete(account.device_key_account);
    this.connection.forgetAccount();
  }
}
