import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http-client.ts';
import { enrolledDevice } from '../helpers/flows.ts';
import type { TestDevice } from '../helpers/test-device.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

// §16.5: CORS only for origins the operator configured.

let service: TestService;
let ann: TestDevice;
beforeAll(async () => {
  service = await startTestService({ corsOrigins: ['https://app.example.org'] });
  ann = await enrolledDevice(service, 'ann@example.org');
});
afterAll(async () => service.close());

describe('configured CORS', () => {
  it('answers preflight and reads for the configured origin only', async () => {
    const allowed = { origin: 'https://app.example.org' };
    const preflight = await call('OPTIONS', `${service.api}/buckets`, { headers: allowed });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://app.example.org');
    const read = await call('GET', `${service.api}/buckets`, {
      token: ann.token(),
      headers: allowed,
    });
    expect(read.headers.get('access-control-allow-origin')).toBe('https://app.example.org');
    const other = { origin: 'https://app.example.org.attacker.example' };
    expect((await call('OPTIONS', `${service.api}/buckets`, { headers: other })).status).toBe(404);
    const foreign = await call('GET', `${service.api}/buckets`, {
      token: ann.token(),
      headers: other,
    });
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
  });
});
