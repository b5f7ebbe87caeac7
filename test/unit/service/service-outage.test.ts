import { describe, expect, it } from 'vitest';
import { EngineError } from '../../../main/api/index.ts';
import { isOutage, ServiceOutage, type ServiceWait } from '../../../main/service/service-outage.ts';
import { answerCut, errorFromResponse, networkError } from '../../../main/service/http-errors.ts';

// Which failures an operation under way waits out, for how long, and what it tells.

const URL = 'https://backup.example.org/api/v1/buckets';
const refused = networkError(URL, new Error('connect ECONNREFUSED 192.0.2.1:443'));

describe('an outage of the service', () => {
  it('is a connection that fails, an answer cut off that may be asked again, or a proxy whose service is down', () => {
    expect(isOutage(refused)).toBe(true);
    expect(isOutage(answerCut(URL, new Error('other side closed'), true))).toBe(true);
    for (const status of [502, 503, 504])
      expect(isOutage(errorFromResponse(status, {}))).toBe(true);
  });

  it('is not a failure that asking again does not mend, nor a service that answers', () => {
    // An answer cut off after a request that must not be sent twice.
    expect(isOutage(answerCut(URL, new Error('other side closed'), false))).toBe(false);
    // A service that fails as it answers: its own bug, not its absence.
    expect(isOutage(errorFromResponse(500, { code: 'internal', msg: 'boom' }))).toBe(false);
    expect(isOutage(errorFromResponse(429, {}))).toBe(false);
    expect(isOutage(errorFromResponse(404, {}))).toBe(false);
    expect(isOutage(new EngineError('untrusted_server', 'cannot trust it'))).toBe(false);
  });
});

describe('ServiceOutage', () => {
  function outageAt(budgetMs: number) {
    let now = 1_000_000;
    const told: ServiceWait[] = [];
    const outage = new ServiceOutage(
      budgetMs,
      () => now,
      (wait) => told.push(wait),
    );
    return { outage, told, pass: (ms: number) => (now += ms), at: () => now };
  }

  it('waits only once the operation reached the service', () => {
    const { outage, told, at } = outageAt(60_000);
    expect(outage.mayWait(refused, at())).toBe(false);
    expect(told).toEqual([]);
    outage.succeeded();
    expect(outage.mayWait(refused, at())).toBe(true);
    expect(told).toEqual([{ state: 'waiting', error: refused, givesUpAt: at() + 60_000 }]);
  });

  it('tells its wait once, however many requests wait, and that it reached the service once', () => {
    const { outage, told, at, pass } = outageAt(60_000);
    outage.succeeded();
    const firstFailure = at();
    expect(outage.mayWait(refused, firstFailure)).toBe(true);
    pass(5000);
    expect(outage.mayWait(refused, at())).toBe(true);
    expect(outage.mayWait(refused, firstFailure)).toBe(true);
    outage.succeeded();
    outage.succeeded();
    expect(told.map((wait) => wait.state)).toEqual(['waiting', 'reached']);
  });

  it('gives a request up once the budget since its first failure is spent', () => {
    const { outage, told, at, pass } = outageAt(60_000);
    outage.succeeded();
    const firstFailure = at();
    pass(59_999);
    expect(outage.mayWait(refused, firstFailure)).toBe(true);
    pass(1);
    expect(outage.mayWait(refused, firstFailure)).toBe(false);
    // A request that failed later has its own minute.
    expect(outage.mayWait(refused, at())).toBe(true);
    expect(told.map((wait) => wait.state)).toEqual(['waiting']);
  });

  it('does not wait out a failure that is no outage', () => {
    const { outage, told, at } = outageAt(60_000);
    outage.succeeded();
    expect(outage.mayWait(errorFromResponse(500, {}), at())).toBe(false);
    expect(told).toEqual([]);
  });
});
