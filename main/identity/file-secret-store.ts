import {
  chmodSync,
  mkdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
  openSync,
  fsyncSync,
  closeSync,
} from 'node:fs';
import path from 'node:path';
import { EngineError } from '../api/index.ts';
import type { SecretStore } from './secret-store.ts';
import { SECRETS_LOCK_WAIT_MS, whileLocked } from './secrets-file-lock.ts';

// A 0600 JSON file in the Canopy home, for machines with no keychain. It protects secrets
// only as well as the account's file permissions do, which is why choosing it is loud.

export const SECRETS_FILE = 'secrets.json';
/** Held while the secrets file changes (secrets-file-lock.ts). */
const SECRETS_LOCK_FILE = 'secrets.lock';

export class FileSecretStore implements SecretStore {
  readonly kind = 'file';
  readonly location: string;
  readonly keychainUnanswered?: string;
  private readonly lockFile: string;
  private readonly lockWaitMs: number;

  /**
   * `lockWaitMs`: how long a change waits for another process changing the file;
   * `keychainUnanswered`: why this file stands in for a keychain (SecretStore).
   */
  constructor(
    home: string,
    options: { readonly lockWaitMs?: number; readonly keychainUnanswered?: string } = {},
  ) {
    this.location = path.join(home, SECRETS_FILE);
    this.lockFile = path.join(home, SECRETS_LOCK_FILE);
    this.lockWaitMs = options.lockWaitMs ?? SECRETS_LOCK_WAIT_MS;
    if (options.keychainUnanswered !== undefined)
      this.keychainUnanswered = options.keychainUnanswered;
  }

  private read(): Record<string, string> {
    try {
      const parsed: unknown = JSON.parse(readFileSync(this.location, 'utf8'));
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        throw new EngineError('secret_store', `${this.location} is not a secrets file`);
      }
      return parsed as Record<string, string>;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
      if (error instanceof EngineError) throw error;
      throw new EngineError('secret_store', `cannot read ${this.location}`, { cause: error });
    }
  }

  private write(secrets: Record<string, string>): void {
    try {
      mkdirSync(path.dirname(this.location), { recursive: true, mode: 0o700 });
      const staged = `${this.location}.${process.pid}.tmp`;
      writeFileSync(staged, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600 });
      const fd = openSync(staged, 'r');
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(staged, this.location);
      chmodSync(this.location, 0o600);
    } catch (error) {
      throw new EngineError('secret_store', `cannot write ${this.location}`, { cause: error });
    }
  }

  get(account: string): Promise<string | null> {
    return settled(() => this.read()[account] ?? null);
  }

  set(account: string, secret: string): Promise<void> {
    return settled(() =>
      whileLocked(
        this.lockFile,
        () => {
          const secrets = this.read();
          secrets[account] = secret;
          this.write(secrets);
        },
        this.lockWaitMs,
      ),
    );
  }

  delete(account: string): Promise<boolean> {
    return settled(() =>
      whileLocked(
        this.lockFile,
        () => {
          const secrets = this.read();
          if (!(account in secrets)) return false;
          delete secrets[account];
          this.write(secrets);
          return true;
        },
        this.lockWaitMs,
      ),
    );
  }
}

/** What `work` returns, or what it throws, as a promise: a SecretStore fails by rejecting. */
function settled<T>(work: () => T): Promise<T> {
  return Promise.resolve().then(work);
}
