import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';
import { parseP384PublicKeyPem, spkiToPem } from '../protocol/index.ts';
import { EngineError } from '../api/index.ts';
import type { SecretStore } from './secret-store.ts';

// A P-384 key pair whose private half lives only in the SecretStore (PKCS#8 PEM). Used for the
// device key and for bucket keys.

export interface KeyPair {
  readonly privateKey: KeyObject;
  /** SPKI PEM with 64-character lines, as the service expects (§4.2). */
  readonly pem: string;
  readonly fingerprint: string;
}

function keyPairOf(privateKey: KeyObject): KeyPair {
  const spki = new Uint8Array(createPublicKey(privateKey).export({ type: 'spki', format: 'der' }));
  const pem = spkiToPem(spki);
  return { privateKey, pem, fingerprint: parseP384PublicKeyPem(pem).fingerprint };
}

export async function loadKeyPair(secrets: SecretStore, account: string): Promise<KeyPair | null> {
  const stored = await secrets.get(account);
  if (stored === null) return null;
  try {
    return keyPairOf(createPrivateKey(stored));
  } catch (error) {
    throw new EngineError(
      'secret_store',
      `the key stored as "${account}" in ${secrets.location} is damaged`,
      { cause: error },
    );
  }
}

/** Loads the key pair stored under `account`, creating and storing one on first use. */
export async function loadOrCreateKeyPair(secrets: SecretStore, account: string): Promise<KeyPair> {
  const existing = await loadKeyPair(secrets, account);
  if (existing) return existing;
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-384' });
  await secrets.set(account, privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
  // Read back what was stored: a keychain that silently dropped it must fail here, not later.
  const stored = await loadKeyPair(secrets, account);
  if (!stored || stored.fingerprint !== keyPairOf(privateKey).fingerprint) {
    throw new EngineError('secret_store', `${secrets.location} did not keep the new key`);
  }
  return stored;
}
