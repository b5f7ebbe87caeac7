import { describe, expect, it } from 'vitest';
import { ServerClock } from '../../../main/service/index.ts';

// The service's time as the device learns it from answers' Date headers (whole seconds).

describe('ServerClock', () => {
  it("follows the service's clock once it is off by more than the header's precision allows", () => {
    let local = Date.UTC(2026, 10, 26, 12, 0, 0, 250);
    const clock = new ServerClock(() => local);
    expect(clock.observe(null)).toBe(false);
    expect(clock.observe('not a date')).toBe(false);
    // A few seconds apart: transit and rounding, not a wrong clock.
    expect(clock.observe(new Date(local + 4000).toUTCString())).toBe(false);
    expect(clock.now()).toBe(local);

    // This computer 13 hours ahead: the service's time is taken, to within a second.
    const serviceNow = local - 13 * 3_600_000;
    expect(clock.observe(new Date(serviceNow).toUTCString())).toBe(true);
    expect(Math.abs(clock.now() - serviceNow)).toBeLessThan(1000);
    // Told again, nothing moves.
    expect(clock.observe(new Date(serviceNow).toUTCString())).toBe(false);

    // The computer's clock set right meanwhile: the offset goes back to nothing.
    local = serviceNow + 60_000;
    expect(clock.observe(new Date(serviceNow + 60_000).toUTCString())).toBe(true);
    expect(Math.abs(clock.offset)).toBeLessThan(1000);
  });
});
