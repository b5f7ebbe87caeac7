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
  get(account: string): Promise<string | null>;
  set(account: string, secret: string): Promise<void>;
  delete(account: string): Promise<boolean>;
}
