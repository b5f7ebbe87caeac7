import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  RETENTION_RULES,
  keepsAny,
  policyFromText,
  policyOptions,
  policyText,
  versionsKept,
  type RetainedVersion,
} from '../../../main/engine/retention-policy.ts';

// Dates are made in this computer's time zone, as the policy counts its days and weeks.

/** A version made at the local time given, named by that time. */
function madeAt(
  year: number,
  month: number,
  day: number,
  hour = 12,
  minute = 0,
  active = false,
): RetainedVersion {
  const at = new Date(year, month - 1, day, hour, minute);
  return {
    id: `${year}-${month}-${day} ${hour}:${String(minute).padStart(2, '0')}`,
    createdAt: Math.floor(at.getTime() / 1000),
    active,
  };
}

describe('a retention policy', () => {
  it('keeps the newest N with keep-last, and the active version whatever the rules', () => {
    const versions = [
      madeAt(2026, 11, 1),
      madeAt(2026, 11, 2),
      madeAt(2026, 11, 3, 12, 0, true),
      madeAt(2026, 11, 4),
    ];
    // Shuffled: the order given does not matter.
    const kept = versionsKept(
      [versions[2], versions[0], versions[3], versions[1]].filter((v) => v !== undefined),
      {
        last: 2,
      },
    );
    expect(Object.fromEntries(kept)).toEqual({
      '2026-11-4 12:00': ['last'],
      '2026-11-3 12:00': ['active', 'last'],
    });
    // The active version stays even when it is not among the newest (another was made since).
    expect([...versionsKept(versions, { last: 1 }).keys()].sort()).toEqual([
      '2026-11-3 12:00',
      '2026-11-4 12:00',
    ]);
  });

  it('keeps a version the user pinned whatever the rules', () => {
    const pinned = { ...madeAt(2026, 1, 1), pinned: true };
    const kept = versionsKept([pinned, madeAt(2026, 2, 1), madeAt(2026, 3, 1, 12, 0, true)], {
      last: 1,
    });
    expect(Object.fromEntries(kept)).toEqual({
      '2026-3-1 12:00': ['active', 'last'],
      '2026-1-1 12:00': ['pinned'],
    });
  });

  it("keeps each day's newest version for the last N days that have one", () => {
    const versions = [
      madeAt(2026, 11, 20, 9),
      madeAt(2026, 11, 20, 18),
      madeAt(2026, 11, 22, 0, 30),
      madeAt(2026, 11, 22, 23, 59),
      madeAt(2026, 11, 25, 8),
    ];
    // Days without a version do not count: the 21st, 23rd and 24th.
    expect([...versionsKept(versions, { daily: 3 }).keys()]).toEqual([
      '2026-11-25 8:00',
      '2026-11-22 23:59',
      '2026-11-20 18:00',
    ]);
    expect([...versionsKept(versions, { hourly: 2 }).keys()]).toEqual([
      '2026-11-25 8:00',
      '2026-11-22 23:59',
    ]);
  });

  it('counts ISO weeks, Monday to Sunday, across the turn of a year', () => {
    const versions = [
      // Monday 29 December 2025 is in ISO week 1 of 2026, with Sunday 4 January 2026.
      madeAt(2025, 12, 28), // Sunday: week 52 of 2025
      madeAt(2025, 12, 29), // Monday: week 1 of 2026
      madeAt(2026, 1, 4), // Sunday: week 1 of 2026
      madeAt(2026, 1, 5), // Monday: week 2
    ];
    expect([...versionsKept(versions, { weekly: 3 }).keys()]).toEqual([
      '2026-1-5 12:00',
      '2026-1-4 12:00',
      '2025-12-28 12:00',
    ]);
  });

  it('keeps by month and year, and a version kept by several rules says each', () => {
    const versions = [
      madeAt(2024, 6, 1),
      madeAt(2025, 3, 1),
      madeAt(2025, 3, 31),
      madeAt(2025, 12, 31),
      madeAt(2026, 1, 15),
    ];
    const kept = versionsKept(versions, { monthly: 2, yearly: 3 });
    expect(Object.fromEntries(kept)).toEqual({
      '2026-1-15 12:00': ['monthly', 'yearly'],
      '2025-12-31 12:00': ['monthly', 'yearly'],
      '2024-6-1 12:00': ['yearly'],
    });
    // More periods asked for than there are: every period's newest is kept, no more.
    expect([...versionsKept(versions, { monthly: 100 }).keys()]).toHaveLength(4);
  });

  it('keeps every version made within a span before the newest, by the calendar', () => {
    const versions = [
      madeAt(2026, 2, 27, 23),
      madeAt(2026, 2, 28, 9),
      madeAt(2026, 3, 20),
      madeAt(2026, 3, 31, 9),
    ];
    // A month before 31 March is the last day of February, at the same time of day.
    expect([...versionsKept(versions, { within: { count: 1, unit: 'month' } }).keys()]).toEqual([
      '2026-3-31 9:00',
      '2026-3-20 12:00',
      '2026-2-28 9:00',
    ]);
    expect(
      Object.fromEntries(versionsKept(versions, { within: { count: 11, unit: 'day' }, last: 1 })),
    ).toEqual({ '2026-3-31 9:00': ['within', 'last'], '2026-3-20 12:00': ['within'] });
    expect([...versionsKept(versions, { within: { count: 1, unit: 'week' } }).keys()]).toEqual([
      '2026-3-31 9:00',
    ]);
    expect([...versionsKept(versions, { within: { count: 1, unit: 'year' } }).keys()]).toHaveLength(
      4,
    );
    // From the newest version, not from now: a bucket left alone for a year keeps its last span.
    expect([
      ...versionsKept(versions.slice(0, 2), { within: { count: 10, unit: 'hour' } }).keys(),
    ]).toEqual(['2026-2-28 9:00', '2026-2-27 23:00']);
  });

  it('keeps nothing by rules of zero, which is told before anything is removed', () => {
    expect(keepsAny({})).toBe(false);
    expect(keepsAny({ daily: 0, last: 0 })).toBe(false);
    expect(keepsAny({ yearly: 1 })).toBe(true);
    expect(keepsAny({ within: { count: 0, unit: 'day' } })).toBe(false);
    expect(keepsAny({ within: { count: 2, unit: 'day' } })).toBe(true);
    expect(versionsKept([madeAt(2026, 1, 1)], { daily: 0 }).size).toBe(0);
  });

  it('is kept as text and read back, and one this Canopy does not know is not read in part', () => {
    const policy = { daily: 7, weekly: 4, within: { count: 14, unit: 'day' } } as const;
    expect(policyFromText(policyText(policy))).toEqual(policy);
    expect(policyOptions(policy)).toBe('--keep-daily 7 --keep-weekly 4 --keep-within 14d');
    expect(policyOptions({ last: 0, monthly: 6 })).toBe('--keep-monthly 6');
    // A rule a later Canopy added: applied without it, the policy would remove what it keeps.
    expect(policyFromText('{"daily":7,"tagged":"keep"}')).toBeUndefined();
    for (const text of [
      'not json',
      '[]',
      'null',
      '{}',
      '{"daily":-1}',
      '{"daily":1.5}',
      '{"daily":"7"}',
      '{"within":{"count":2,"unit":"fortnight"}}',
      '{"within":null}',
    ])
      expect(policyFromText(text), text).toBeUndefined();
  });

  it('keeps, for any versions and rules, the active one, the newest N, never more than the rules count, and more for larger counts', () => {
    const YEAR = 365 * 24 * 3600;
    const versionsArb = fc
      .uniqueArray(fc.integer({ min: 1_700_000_000, max: 1_700_000_000 + 3 * YEAR }), {
        minLength: 1,
        maxLength: 60,
      })
      .chain((times) =>
        fc.record({
          times: fc.constant(times),
          active: fc.integer({ min: 0, max: times.length - 1 }),
        }),
      )
      .map(({ times, active }) =>
        times.map((createdAt, index) => ({ id: `v${index}`, createdAt, active: index === active })),
      );
    const countArb = fc.option(fc.integer({ min: 0, max: 12 }), { nil: undefined });
    const policyArb = fc.record({
      last: countArb,
      hourly: countArb,
      daily: countArb,
      weekly: countArb,
      monthly: countArb,
      yearly: countArb,
    });
    fc.assert(
      fc.property(versionsArb, policyArb, (versions, given) => {
        const policy = Object.fromEntries(
          Object.entries(given).filter(([, count]) => count !== undefined),
        ) as Partial<Record<(typeof RETENTION_RULES)[number], number>>;
        const kept = versionsKept(versions, policy);
        const active = versions.find((version) => version.active);
        expect(kept.get(active?.id ?? '')).toContain('active');
        const newest = [...versions].sort((a, b) => b.createdAt - a.createdAt);
        for (const version of newest.slice(0, policy.last ?? 0))
          expect(kept.get(version.id)).toContain('last');
        // Each rule keeps at most its count, and each kept version is kept by some rule.
        const counted = RETENTION_RULES.reduce((sum, rule) => sum + (policy[rule] ?? 0), 0);
        expect(kept.size).toBeLessThanOrEqual(1 + counted);
        for (const rule of RETENTION_RULES)
          expect([...kept.values()].filter((why) => why.includes(rule)).length).toBeLessThanOrEqual(
            policy[rule] ?? 0,
          );
        // One more of each keeps all it kept, and maybe more.
        const more = Object.fromEntries(
          RETENTION_RULES.map((rule) => [rule, (policy[rule] ?? 0) + 1]),
        );
        const keptByMore = versionsKept(versions, more);
        for (const id of kept.keys()) expect(keptByMore.has(id)).toBe(true);
      }),
      { numRuns: 300, seed: 20261129 },
    );
  });
});
