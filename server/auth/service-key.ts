import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';
import { readFileSync, writeFileSync, renameSync, chmodSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseP384PublicKeyPem } from '../../main/protocol/index.ts';

// The service's own P-384 key (§4.1), which signs storage authorizations. Created on first
// start in a file only the server's account can read; never disclosed.

export interface ServiceKey {
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  readonly fingerprint: string;
}

const KEY_FILE = 'service-key.pem';

export function loadOrCreateServiceKey(
  dataDir: string,
  options: { readonly readOnly?: boolean } = {},
): ServiceKey {
  const file = path.join(dataDir, KEY_FILE);
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
    // On a disk mounted read-only nothing can be tightened, nor read by anyone new meanwhile.
    if (!options.readOnly && (statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const staged = `${file}.${process.pid}.tmp`;
    writeFileSync(staged, pem, { mode: 0o600, flag: 'wx' });
    renameSync(staged, file);
    // Another process may have won the race; read back what is on disk.
    pem = readFileSync(file, 'utf8');
  }
  const privateKey = createPrivateKey(pem);
  const publicKey = createPublicKey(privateKey);
  const spkiPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  return { privateKey, publicKey, fingerprint: parseP384PublicKeyPem(spkiPem).fingerprint };
}
