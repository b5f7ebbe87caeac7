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
// only as well as the account's file permissions do, which is why choosing it is loud. One
// found damaged on its disk is set aside, as a damaged state database is, and told: left in
// place, it refused every command, `canopy login` and `canopy logout` too, with "cannot read".

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

  /** The file's secrets: none when it is absent; throws when it cannot be read or is damaged. */
  private read(): Record<string, string> {
    const secrets = this.parsed();
    if (secrets !== 'damaged') return secrets;
    // Set aside under the lock, and only if it is still damaged then: another process may have
    // written it whole meanwhile, which must not go aside.
    const aside = whileLocked(
      this.lockFile,
      () => {
        if (this.parsed() !== 'damaged') return undefined;
        const kept = `${this.location}.damaged-${new Date().toISOString().replaceAll(':', '-')}`;
        renameSync(this.location, kept);
        return kept;
      },
      this.lockWaitMs,
    );
    if (aside === undefined) return this.read();
    throw new EngineError(
      'secret_store',
      `${this.location} was damaged (it does not read as the secrets file Canopy writes) and is kept aside as ${aside}: the device key it held is lost with it; log in again to enroll this device anew; its backups are untouched`,
    );
  }

  /**
   * The file's secrets as written; {} when it is absent; 'damaged' when it is not the JSON object
   * this store writes (whole files are renamed into place, so a reader never sees one half
   * written: only the disk damages one). Throws when it cannot be read at all.
   */
  private parsed(): Record<string, string> | 'damaged' {
    let text: string;
    try {
      text = readFileSync(this.location, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return {};
      throw new EngineError(
        'secret_store',
        `cannot read ${this.location} (${code ?? String(error)})`,
        {
          cause: error,
        },
      );
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return 'damaged';
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return 'damaged';
    return parsed as Record<string, string>;
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
