import { describe, expect, it } from 'vitest';
import { networkError } from '../../../main/service/http-errors.ts';

// A TLS failure as fetch gives it: a TypeError ("fetch failed") whose cause is the socket's
// error, carrying OpenSSL's verification code.
function fetchFailure(code: string, message: string): TypeError {
  return new TypeError('fetch failed', {
    cause: Object.assign(new Error(message), { code }),
  });
}

describe('a server certificate this computer does not trust', () => {
  it('is told as such, not retried, with what to do about it', () => {
    const url = 'https://backup.example.org/api/v1/who_am_i';
    const expired = networkError(url, fetchFailure('CERT_HAS_EXPIRED', 'certificate has expired'));
    expect(expired).toMatchObject({
      code: 'untrusted_server',
      retryable: false,
      message:
        "cannot trust https://backup.example.org: its certificate has expired (or the clock of this computer is wrong); the server's administrator can renew or correct it",
    });
    const otherName = networkError(
      url,
      fetchFailure(
        'ERR_TLS_CERT_ALTNAME_INVALID',
        "Hostname/IP does not match certificate's altnames",
      ),
    );
    expect(otherName.message).toBe(
      "cannot trust https://backup.example.org: its certificate is made out for another name; on a network that wants you to sign in first (a hotel's or café's Wi-Fi), sign in from a web browser, then try again; otherwise the server's administrator can correct it",
    );
    expect(
      networkError(
        url,
        fetchFailure('UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'unable to get local issuer certificate'),
      ).message,
    ).toContain('signed by an unknown authority; if the server is your own');
  });

  it('leaves every other network failure retryable, as it was', () => {
    const refused = networkError(
      'https://backup.example.org/api/v1/buckets',
      fetchFailure('ECONNREFUSED', 'connect ECONNREFUSED 203.0.113.7:443'),
    );
    expect(refused).toMatchObject({
      code: 'network',
      retryable: true,
      message: 'cannot reach https://backup.example.org (connect ECONNREFUSED 203.0.113.7:443)',
    });
  });
});
