import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPairSync, sign } from 'node:crypto';
import { call } from '../helpers/http-client.ts';
import { enrolledDevice } from '../helpers/flows.ts';
import { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { base64urlEncode, parseP384PublicKeyPem } from '../../main/protocol/index.ts';

// §18 items 1–12 and 44 (transport, errors, JWT verification).

let service: TestService;
let ann: TestDevice;
let bob: TestDevice;

beforeAll(async () => {
  service = await startTestService();
  ann = await enrolledDevice(service, 'ann@example.org');
  bob = await enrolledDevice(service, 'bob@example.org');
});
afterAll(async () => service.close());

const TEST_VECTOR_PEM = `-----BEGIN PUBLIC KEY-----
MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEqofKIr6LBTeOscce8yCtdG4dO2KLp5uY
WfdB4IJUKjhVAvJdv1UpbDpUXjhydgq3NhfeSpYmLG9dnpi/kpLcKfj0Hb0omhR8
6doxE7XwuMAKYLHOHX6BnXpDHXyQ6g5f
-----END PUBLIC KEY-----`;

async function whoAmI(token: string): Promise<number> {
  return (await call('GET', `${service.api}/auth/who_am_i`, { token })).status;
}

describe('§18 transport and errors', () => {
  it('1: every error, including unknown routes and validation failures, is JSON {msg, code}', async () => {
    const unknown = await call('GET', `${service.api}/no/such/route`);
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toMatch(/^application\/json/);
    expect(unknown.json).toEqual({ msg: expect.any(String), code: 'not_found' });
    const wrongMethod = await call('PATCH', `${service.api}/buckets`, {
      token: ann.token(),
      json: {},
    });
    expect(wrongMethod.status).toBe(404);
    expect(wrongMethod.json.code).toBe('not_found');
    const invalid = await call('POST', `${service.api}/buckets`, {
      token: ann.token(),
      json: { name: '' },
    });
    expect(invalid.status).toBe(400);
    expect(invalid.json).toEqual({ msg: expect.any(String), code: 'invalid_request' });
    expect(Object.keys(invalid.json).sort()).toEqual(['code', 'msg']);
  });

  it('2: JSON bodies need application/json; "no body" endpoints accept an empty body only', async () => {
    const body = JSON.stringify({
      name: 'x',
      type: 'backup',
      storage_class: 'hot',
      initial_bucket_key_pem: TEST_VECTOR_PEM,
    });
    const plain = await call('POST', `${service.api}/buckets`, {
      token: ann.token(),
      body,
      contentType: 'text/plain',
    });
    expect(plain.status).toBe(415);
    expect(plain.json.code).toBe('unsupported_media_type');
    const none = await call('POST', `${service.api}/buckets`, { token: ann.token(), body });
    expect(none.status).toBe(415);
    const url = `${service.api}/auth/enrollment_codes`;
    expect((await call('POST', url, { token: ann.token() })).status).toBe(200);
    expect(
      (await call('POST', url, { token: ann.token(), body: '', contentType: 'text/plain' })).status,
    ).toBe(200);
    expect((await call('POST', url, { token: ann.token(), json: {} })).status).toBe(200);
    const textBody = await call('POST', url, {
      token: ann.token(),
      body: '{}',
      contentType: 'text/plain',
    });
    expect(textBody.status).toBe(415);
    const extra = await call('POST', url, { token: ann.token(), json: { x: 1 } });
    expect(extra.status).toBe(400);
    expect(extra.json.code).toBe('invalid_request');
  });

  it('3: an unknown request field is 400 and msg names it', async () => {
    const response = await call('POST', `${service.api}/buckets`, {
      token: ann.token(),
      json: {
        name: 'n',
        type: 'backup',
        storage_class: 'hot',
        initial_bucket_key_pem: TEST_VECTOR_PEM,
        owner_id: bob.userId,
      },
    });
    expect(response.status).toBe(400);
    expect(response.json.msg).toContain('owner_id');
  });

  it('4: a malformed or upper-case UUID in a path is 404; in a body it is 400', async () => {
    for (const id of [
      'not-a-uuid',
      '0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D',
      '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d',
    ]) {
      const response = await call('GET', `${service.api}/buckets/${id}`, { token: ann.token() });
      expect(response.status).toBe(404);
      expect(response.json.code).toBe('not_found');
    }
    const inBody = await call('GET', `${service.api}/buckets/metadata?bucket_id=NOT-A-UUID`, {
      token: ann.token(),
    });
    expect(inBody.status).toBe(404);
  });

  it('5: a missing, non-Bearer or lower-case "bearer" Authorization is 401 not authorized', async () => {
    const url = `${service.api}/buckets`;
    const token = ann.token();
    for (const headers of [
      {},
      { authorization: `Basic ${token}` },
      { authorization: `bearer ${token}` },
      { authorization: `Bearer  ${token}` },
      { authorization: 'Bearer ' },
    ]) {
      const response = await call('GET', url, { headers });
      expect(response.status).toBe(401);
      expect(response.json).toEqual({ msg: 'not authorized', code: 'not_authorized' });
    }
    expect((await call('GET', url, { token })).status).toBe(200);
  });

  it('6: the §4 test-vector PEM has fingerprint a04a2401…', () => {
    expect(parseP384PublicKeyPem(TEST_VECTOR_PEM).fingerprint).toBe(
      'a04a240135a947babf7474f564b251382d10609f',
    );
  });
});

describe('§18 device JWT verification', () => {
  it('7: alg other than ES384, a DER signature, header members added or missing, unknown kid are 401; member order is free', async () => {
    expect(
      await whoAmI(
        ann.customToken(({ header }) => {
          header['alg'] = 'ES256';
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ header }) => {
          header['crit'] = ['exp'];
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ header }) => {
          delete header['typ'];
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ header }) => {
          header['kid'] = bob.fingerprint.replace(/.$/, '0');
        }),
      ),
    ).toBe(401);
    const reordered = ann.customToken(({ header }) => {
      delete header['alg'];
      header['alg'] = 'ES384';
    });
    expect(await whoAmI(reordered)).toBe(200);
    const good = ann.token();
    // Accepted first, so a server that remembers verified tokens must still check the
    // signature of another token with the same header and claims.
    expect(await whoAmI(good)).toBe(200);
    const [h, c] = good.split('.');
    const der = sign('sha384', Buffer.from(`${h}.${c}`), ann.privateKey);
    expect(await whoAmI(`${h}.${c}.${base64urlEncode(der)}`)).toBe(401);
    const none = TestDevice.rawToken(
      { alg: 'none', typ: 'JWT', kid: ann.fingerprint },
      JSON.parse(Buffer.from(c ?? '', 'base64url').toString()) as Record<string, unknown>,
      '',
    );
    expect(await whoAmI(none)).toBe(401);
    const zero = `${h}.${c}.${base64urlEncode(new Uint8Array(96))}`;
    expect(await whoAmI(zero)).toBe(401);
    // Sent again: a token that was refused is refused again.
    expect(await whoAmI(zero)).toBe(401);
  });

  it('7: HS256 keyed with the public key (algorithm confusion) is 401', async () => {
    const { createHmac } = await import('node:crypto');
    const header = base64urlEncode(
      JSON.stringify({ alg: 'HS256', typ: 'JWT', kid: ann.fingerprint }),
    );
    const now = Math.floor(Date.now() / 1000);
    const claims = base64urlEncode(
      JSON.stringify({
        iat: now,
        nbf: now - 30,
        exp: now + 300,
        sub: ann.userId,
        aud: 'banyan-platform',
        nonce: 'abcdefghijklmnop',
      }),
    );
    const mac = createHmac('sha256', ann.pem).update(`${header}.${claims}`).digest();
    expect(await whoAmI(`${header}.${claims}.${base64urlEncode(mac)}`)).toBe(401);
  });

  it('8: an extra claim, a missing nonce or a short nonce is 401', async () => {
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['role'] = 'admin';
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          delete claims['nonce'];
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['nonce'] = 'short-nonce';
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['nonce'] = '123456789012';
        }),
      ),
    ).toBe(200);
  });

  it('9: aud other than banyan-platform, or as an array, is 401', async () => {
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['aud'] = 'banyan-storage';
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['aud'] = ['banyan-platform'];
        }),
      ),
    ).toBe(401);
  });

  it('10: time rules hold with the leeway; a recommended token is accepted', async () => {
    const now = Math.floor(Date.now() / 1000);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['nbf'] = now - 400;
          claims['exp'] = now - 25;
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['nbf'] = now + 25;
          claims['exp'] = now + 300;
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['iat'] = now + 25;
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['nbf'] = now - 30;
          claims['exp'] = now + 871;
        }),
      ),
    ).toBe(401);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['exp'] = now - 15;
          claims['nbf'] = now - 100;
        }),
      ),
    ).toBe(200);
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['exp'] = String(now + 100);
        }),
      ),
    ).toBe(401);
    expect(await whoAmI(ann.token())).toBe(200);
  });

  it('every answer states in Date the time of the clock its tokens and upload windows are judged by', async () => {
    const HOUR = 3_600_000;
    /** How far an answer's Date is from this machine's clock, in ms. */
    const dateSkew = (answer: { headers: Headers }): number =>
      Date.parse(answer.headers.get('date') ?? '') - Date.now();
    service.advance(HOUR);
    try {
      // A token by this machine's clock is an hour old by the service's, and refused.
      const refused = await call('GET', `${service.api}/auth/who_am_i`, { token: ann.token() });
      expect(refused.status).toBe(401);
      expect(Math.abs(dateSkew(refused) - HOUR)).toBeLessThan(5_000);
      const unknown = await call('GET', `${service.api}/no/such/route`);
      expect(Math.abs(dateSkew(unknown) - HOUR)).toBeLessThan(5_000);
    } finally {
      service.advance(-HOUR);
    }
    const answer = await call('GET', `${service.api}/auth/who_am_i`, { token: ann.token() });
    expect(answer.status).toBe(200);
    expect(Math.abs(dateSkew(answer))).toBeLessThan(5_000);
  });

  it('11: a valid signature with sub set to another user is 401', async () => {
    expect(
      await whoAmI(
        ann.customToken(({ claims }) => {
          claims['sub'] = bob.userId;
        }),
      ),
    ).toBe(401);
  });

  it('12: compressed-point, P-256 and RSA keys are 400 on every endpoint that takes a PEM', async () => {
    const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 })
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey;
    const compressedDer = p384.export({ type: 'spki', format: 'der' });
    const jwk = p384.export({ format: 'jwk' });
    const x = Buffer.from(jwk.x ?? '', 'base64url');
    const y = Buffer.from(jwk.y ?? '', 'base64url');
    const prefix = Buffer.from('3046301006072a8648ce3d020106052b81040022033200', 'hex');
    const compressed = Buffer.concat([
      prefix,
      Buffer.from([((y.at(-1) ?? 0) & 1) === 1 ? 3 : 2]),
      x,
    ]);
    const compressedPem = `-----BEGIN PUBLIC KEY-----\n${compressed.toString('base64')}\n-----END PUBLIC KEY-----\n`;
    const trailing = `-----BEGIN PUBLIC KEY-----\n${Buffer.concat([compressedDer, Buffer.from([0])]).toString('base64')}\n-----END PUBLIC KEY-----\n`;
    const privatePem = generateKeyPairSync('ec', { namedCurve: 'P-384' })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
    const { code } = service.addUser('pem-test@example.org');
    for (const pem of [compressedPem, p256, rsa, trailing, privatePem]) {
      const enroll = await call('POST', `${service.api}/auth/enroll`, { json: { code, pem } });
      expect(enroll.status).toBe(400);
      expect(enroll.json.msg).toMatch(/^pem:/);
      const key = await call('POST', `${service.api}/auth/device_api_key`, {
        token: ann.token(),
        json: { pem },
      });
      expect(key.status).toBe(400);
      const bucket = await call('POST', `${service.api}/buckets`, {
        token: ann.token(),
        json: { name: 'pem', type: 'backup', storage_class: 'hot', initial_bucket_key_pem: pem },
      });
      expect(bucket.status).toBe(400);
      expect(bucket.json.msg).toMatch(/^initial_bucket_key_pem:/);
    }
  });
});

describe('§18 item 44: CORS, OPTIONS and HEAD', () => {
  it('responses carry no CORS headers, OPTIONS is 404, HEAD answers like GET without a body', async () => {
    const get = await call('GET', `${service.api}/buckets`, {
      token: ann.token(),
      headers: { origin: 'https://evil.example' },
    });
    expect([...get.headers.keys()].filter((name) => name.startsWith('access-control-'))).toEqual(
      [],
    );
    const options = await call('OPTIONS', `${service.api}/buckets`, {
      headers: { origin: 'https://evil.example' },
    });
    expect(options.status).toBe(404);
    const head = await call('HEAD', `${service.api}/users/current`, { token: ann.token() });
    expect(head.status).toBe(200);
    expect(head.bytes.length).toBe(0);
    expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'));
    expect((await call('HEAD', `${service.api}/users/current`)).status).toBe(401);
  });
});
