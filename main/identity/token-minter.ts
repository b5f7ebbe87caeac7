import { mintDeviceJwt } from '../protocol/index.ts';
import type { KeyPair } from './device-key.ts';

/**
 * Device JWTs for one key and user, cached and re-minted 30 s before they expire (§5.1).
 * `now` returns milliseconds, so tests can move time.
 */
export class TokenMinter {
  private cached: { token: string; iat: number; exp: number } | undefined;
  private readonly key: KeyPair;
  private readonly userId: string;
  private readonly now: () => number;

  constructor(key: KeyPair, userId: string, now: () => number = Date.now) {
    this.key = key;
    this.userId = userId;
    this.now = now;
  }

  token(): string {
    const nowSeconds = Math.floor(this.now() / 1000);
    // Also when the clock went back (set right, or the service's time learnt): the cached
    // token would be dated in the future.
    if (!this.cached || this.cached.exp - 30 <= nowSeconds || nowSeconds < this.cached.iat) {
      const minted = mintDeviceJwt({
        privateKey: this.key.privateKey,
        fingerprint: this.key.fingerprint,
        userId: this.userId,
        nowSeconds,
      });
      this.cached = { ...minted, iat: nowSeconds };
    }
    return this.cached.token;
  }
}
