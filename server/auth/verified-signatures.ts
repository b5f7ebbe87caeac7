// Tokens whose ES384 signature this server has verified, so that the same token sent again is
// not verified again. A client sends one storage authorization (and one device JWT) with every
// request until it expires: a restore of the backup bench's 1.2 GiB sent the same token about
// 190 times, and verifying them took 0.2–0.4 s of the thread that also answers the restore.
//
// Only the signature check is remembered. Whether a signature verifies depends on nothing but
// the token's bytes and the key its `kid` names, and a `kid` is the fingerprint of that very
// key, so the same token string always gets the same answer. Everything else (the key still
// live, the claims' times, the caller's rights) is checked on every request as before. Only
// tokens that verified are kept: a forged one differs in its bytes, and is verified in full.

/** Tokens kept at most (a few hundred bytes each), then the memory starts over. */
const MAX_TOKENS = 4096;

export class VerifiedSignatures {
  private readonly tokens = new Set<string>();

  /** Whether `token` (the whole compact JWS) has verified before. */
  has(token: string): boolean {
    return this.tokens.has(token);
  }

  /** Records that `token` verified. */
  add(token: string): void {
    if (this.tokens.size >= MAX_TOKENS) this.tokens.clear();
    this.tokens.add(token);
  }
}
