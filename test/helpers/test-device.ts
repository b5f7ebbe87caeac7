import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import {
  base64urlEncode,
  mintDeviceJwt,
  parseP384PublicKeyPem,
  signCompactJws,
  type JsonObject,
} from '../../main/protocol/index.ts';

// A device key pair as a client holds it, with helpers to mint good and deliberately bad tokens.

export class TestDevice {
  readonly privateKey: KeyObject;
  readonly pem: string;
  readonly fingerprint: string;
  userId = '';
  keyId = '';

  constructor() {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    this.privateKey = privateKey;
    this.pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    this.fingerprint = parseP384PublicKeyPem(this.pem).fingerprint;
  }

  /** A token minted as §5.1 recommends. */
  token(nowSeconds = Math.floor(Date.now() / 1000)): string {
    return mintDeviceJwt({
      privateKey: this.privateKey,
      fingerprint: this.fingerprint,
      userId: this.userId,
      nowSeconds,
    }).token;
  }

  /** A token with arbitrary header and claims, signed (raw r‖s) with this device's key. */
  customToken(
    edit: (parts: { header: JsonObject; claims: JsonObject }) => void,
    nowSeconds = Math.floor(Date.now() / 1000),
  ): string {
    const header: JsonObject = { alg: 'ES384', typ: 'JWT', kid: this.fingerprint };
    const claims: JsonObject = {
      iat: nowSeconds,
      nbf: nowSeconds - 30,
      exp: nowSeconds + 300,
      sub: this.userId,
      aud: 'banyan-platform',
      nonce: 'n0nce-n0nce-n0nce',
    };
    edit({ header, claims });
    return signCompactJws(header, claims, this.privateKey);
  }

  /** An unsigned token: header and claims as given, signature part as given. */
  static rawToken(header: JsonObject, claims: JsonObject, signature: Uint8Array | string): string {
    return `${base64urlEncode(JSON.stringify(header))}.${base64urlEncode(JSON.stringify(claims))}.${
      typeof signature === 'string' ? signature : base64urlEncode(signature)
    }`;
  }
}
