import { createRequire } from 'node:module';
import { EngineError } from '../api/index.ts';
import type { SecretStore } from './secret-store.ts';

// The OS keychain through keytar: macOS Keychain, Windows Credential Manager, the Secret
// Service (gnome-keyring, KWallet) on Linux.

const SERVICE = 'Canopy';

interface Keytar {
  getPassword(service: string, account: string): Promise<string | null>;
  setPassword(service: string, account: string, password: string): Promise<void>;
  deletePassword(service: string, account: string): Promise<boolean>;
}

function loadKeytar(): Keytar {
  try {
    // keytar is a CommonJS native module; loading it lazily keeps the engine usable (with the
    // file store) on machines where it cannot load.
    return createRequire(import.meta.url)('keytar') as Keytar;
  } catch (error) {
    throw new EngineError('secret_store', 'the OS keychain module (keytar) could not be loaded', {
      cause: error,
    });
  }
}

function failed(action: string, error: unknown): EngineError {
  const detail = error instanceof Error ? error.message : String(error);
  return new EngineError('secret_store', `the OS keychain refused to ${action}: ${detail}`, {
    cause: error,
  });
}

export class KeychainSecretStore implements SecretStore {
  readonly kind = 'keychain';
  readonly location = 'the OS keychain (service "Canopy")';
  private readonly keytar: Keytar;

  constructor() {
    this.keytar = loadKeytar();
  }

  async get(account: string): Promise<string | null> {
    try {
      return await this.keytar.getPassword(SERVICE, account);
    } catch (error) {
      throw failed('read a secret', error);
    }
  }

  async set(account: string, secret: string): Promise<void> {
    try {
      await this.keytar.setPassword(SERVICE, account, secret);
    } catch (error) {
      throw failed('store a secret', error);
    }
  }

  async delete(account: string): Promise<boolean> {
    try {
      return await this.keytar.deletePassword(SERVICE, account);
    } catch (error) {
      throw failed('delete a secret', error);
    }
  }

  /** A set/get/delete round trip: true when a usable keychain answers. */
  async probe(): Promise<boolean> {
    const account = `probe-${process.pid}-${Date.now()}`;
    try {
      await this.keytar.setPassword(SERVICE, account, 'probe');
      const back = await this.keytar.getPassword(SERVICE, account);
      await this.keytar.deletePassword(SERVICE, account);
      return back === 'probe';
    } catch {
      // No Secret Service on the bus, a locked collection, …: the caller falls back.
      return false;
    }
  }
}
