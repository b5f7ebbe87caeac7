/**
 * Where private keys live (ARCHITECTURE.md, "The engine's ports").
 *
 * Contract: `set` replaces any secret stored under the same account and is durable when it
 * resolves; `get` resolves to null for an account never set or deleted; `delete` resolves to
 * whether something was removed. Secrets are opaque strings (PEM text). Failures reject with
 * EngineError('secret_store'), which is not retryable: a locked or missing keychain needs the
 * user, not a retry.
 */
export interface SecretStore {
  readonly kind: 'keychain' | 'file';
  /** Where the secrets are, for messages (never the secrets themselves). */
  readonly location: string;
  /**
   * Why a keychain, which may hold this home's keys, was not asked: set on the file that
   * openSecretStore fell back to, for the message when a key is not found there.
   */
  readonly keychainUnanswered?: string;
  /**
   * Which kind of store holds `account`'s secret, as last read or written here, when this one
   * reads from two (either-secret-store.ts); else `kind`.
   */
  kindHolding?(account: string): 'keychain' | 'file';
  get(account: string): Promise<string | null>;
  set(account: string, secret: string): Promise<void>;
  delete(account: string): Promise<boolean>;
}
