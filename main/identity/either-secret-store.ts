import type { SecretStore } from './secret-store.ts';

// The keychain that answered, with the secrets file beside it. A device enrolled where no
// keychain answered (over ssh, say, or before gnome-keyring was set up) has its keys in the
// file; once a keychain answers, Canopy picks it, and looking there alone it found no device
// key and told the user to enroll the device anew, though the key was there all along. So a
// secret missing from the keychain is looked for in the file too. New secrets go to the
// keychain, and a deleted one goes from both.

export class EitherSecretStore implements SecretStore {
  readonly kind: SecretStore['kind'];
  readonly location: string;

  constructor(
    private readonly first: SecretStore,
    private readonly second: SecretStore,
  ) {
    this.kind = first.kind;
    this.location = first.location;
  }

  /** The store each secret read was found in, for kindHolding. */
  private readonly foundIn = new Map<string, SecretStore['kind']>();

  async get(account: string): Promise<string | null> {
    const inFirst = await this.first.get(account);
    if (inFirst !== null) {
      this.foundIn.set(account, this.first.kind);
      return inFirst;
    }
    const inSecond = await this.second.get(account);
    if (inSecond !== null) this.foundIn.set(account, this.second.kind);
    return inSecond;
  }

  kindHolding(account: string): SecretStore['kind'] {
    return this.foundIn.get(account) ?? this.kind;
  }

  async set(account: string, secret: string): Promise<void> {
    await this.first.set(account, secret);
    this.foundIn.set(account, this.first.kind);
  }

  async delete(account: string): Promise<boolean> {
    const fromFirst = await this.first.delete(account);
    // Looked at first: a home whose keys are all in the keychain has its file left untouched
    // (deleting takes the file's lock, which makes one).
    if ((await this.second.get(account)) === null) return fromFirst;
    const fromSecond = await this.second.delete(account);
    return fromFirst || fromSecond;
  }
}
