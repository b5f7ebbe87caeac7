// A server whose TLS certificate this computer does not trust: self-signed (a household server
// set up with its own certificate), signed by an authority not in the system's store, expired,
// or made out for another name (also what a Wi-Fi that wants a sign-in first answers with).
// Sending the request again changes none of these, so it is not retried as a network failure
// is (7 s of retries ended in "cannot reach … (self-signed certificate)"), and the user is told
// what to do about it.

/** OpenSSL's verification codes, as Node gives them on the TLS error, in words. */
const PROBLEMS: Readonly<Record<string, string>> = {
  DEPTH_ZERO_SELF_SIGNED_CERT: 'its certificate is self-signed',
  SELF_SIGNED_CERT_IN_CHAIN: 'its certificate is signed by a self-signed authority',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'its certificate is signed by an unknown authority',
  UNABLE_TO_GET_ISSUER_CERT: 'its certificate is signed by an unknown authority',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'its certificate is signed by an unknown authority',
  CERT_HAS_EXPIRED: 'its certificate has expired (or the clock of this computer is wrong)',
  CERT_NOT_YET_VALID: 'its certificate is not valid yet (or the clock of this computer is wrong)',
  ERR_TLS_CERT_ALTNAME_INVALID: 'its certificate is made out for another name',
};

/** What this computer finds wrong with the server's certificate, or undefined for another failure. */
export function certificateProblemOf(error: unknown): string | undefined {
  // fetch (undici) wraps the socket's error as its cause; a few levels are looked through.
  let cause: unknown = error;
  for (let depth = 0; depth < 4 && cause instanceof Error; depth += 1) {
    const code = (cause as NodeJS.ErrnoException).code;
    if (code !== undefined && Object.hasOwn(PROBLEMS, code)) return PROBLEMS[code];
    cause = cause.cause;
  }
  return undefined;
}

/**
 * A network that wants a sign-in first (a hotel's, a café's Wi-Fi) answers every address itself,
 * with its own certificate: one for its own name, or a self-signed one.
 */
const SIGN_IN_FIRST =
  "on a network that wants you to sign in first (a hotel's or café's Wi-Fi), sign in from a web browser, then try again";

/** What the user can do about `problem`, for the message. */
export function certificateAdvice(problem: string): string {
  if (problem.includes('self-signed'))
    return `${SIGN_IN_FIRST}; if the server is your own, with a certificate of its own, set NODE_EXTRA_CA_CERTS to that certificate's file (or its authority's) and run the command again`;
  if (problem.includes('unknown authority'))
    return "if the server is your own, with a certificate of its own, set NODE_EXTRA_CA_CERTS to that certificate's file (or its authority's) and run the command again";
  if (problem.includes('another name'))
    return `${SIGN_IN_FIRST}; otherwise the server's administrator can correct it`;
  return "the server's administrator can renew or correct it";
}
