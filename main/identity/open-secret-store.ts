import { EngineError } from '../api/index.ts';
import { EitherSecretStore } from './either-secret-store.ts';
import { FileSecretStore } from './file-secret-store.ts';
import { KeychainSecretStore } from './keychain-secret-store.ts';
import type { SecretStore } from './secret-store.ts';

export type SecretStoreChoice = 'keychain' | 'file' | 'auto';

export interface OpenedSecretStore {
  readonly store: SecretStore;
  /** Set when the file fallback was chosen automatically: say it once, loudly. */
  readonly warning: string | null;
}

export function secretStoreChoice(value: string | undefined): SecretStoreChoice {
  if (value === undefined || value === '') return 'auto';
  if (value === 'keychain' || value === 'file') return value;
  throw new EngineError(
    'usage',
    `CANOPY_SECRET_STORE must be "keychain" or "file", not "${value}"`,
  );
}

/**
 * The keychain when one answers (reading keys from the 0600 file too, where they were put while
 * none did); otherwise the file, with a warning that says where the key is and why.
 * `CANOPY_SECRET_STORE` forces either, alone.
 */
export async function openSecretStore(
  home: string,
  choice: SecretStoreChoice,
): Promise<OpenedSecretStore> {
  if (choice === 'file') return { store: new FileSecretStore(home), warning: null };
  let keychain: KeychainSecretStore | undefined;
  let reason = 'no OS keychain answered';
  try {
    keychain = new KeychainSecretStore();
  } catch (error) {
    if (choice === 'keychain') throw error;
    reason = 'the keychain module could not be loaded';
  }
  if (keychain && (await keychain.probe())) {
    // Forced, the keychain alone; else the file too, for keys put there while none answered.
    const store =
      choice === 'keychain' ? keychain : new EitherSecretStore(keychain, new FileSecretStore(home));
    return { store, warning: null };
  }
  if (choice === 'keychain') {
    throw new EngineError(
      'secret_store',
      'the OS keychain is not available (is a Secret Service running and unlocked?)',
    );
  }
  const file = new FileSecretStore(home, { keychainUnanswered: reason });
  return {
    store: file,
    // Not "forces the keychain once one answers": forced, it is looked in alone, and the keys
    // made meanwhile, in the file, would not be found.
    warning: `warning: ${reason}, so Canopy keeps the private keys it makes here in ${file.location} (readable only by you); once a keychain answers, it keeps new ones there and still finds these.`,
  };
}
