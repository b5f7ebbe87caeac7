// Which versions a retention policy keeps, as restic's `forget` and Kopia's policies count them:
// the newest N, and the newest version of each of the last N hours, days, weeks, months and
// years that have one, and (`within`, as restic's `--keep-within`) every version made in a span
// before the newest one. A version kept by any rule is kept; the bucket's active version always
// is, whatever the rules, and so is one the user pinned. Periods are this computer's calendar (its time zone): a "day" is the
// user's day, and a week is an ISO week, Monday to Sunday.

export const RETENTION_RULES = ['last', 'hourly', 'daily', 'weekly', 'monthly', 'yearly'] as const;
export type RetentionRule = (typeof RETENTION_RULES)[number];

export const SPAN_UNITS = ['hour', 'day', 'week', 'month', 'year'] as const;

/** A span of calendar time: 3 days, 6 months. */
export interface RetentionSpan {
  readonly count: number;
  readonly unit: (typeof SPAN_UNITS)[number];
}

/**
 * How many versions (`last`) or periods each rule keeps, a rule left out keeping none; and the
 * span before the newest version within which every version is kept.
 */
export type RetentionPolicy = Readonly<Partial<Record<RetentionRule, number>>> & {
  readonly within?: RetentionSpan;
};

/**
 * Why a version is kept: the rules that keep it, that it is the bucket's active version, or that
 * the user pinned it (`pinned`).
 */
export type KeptBecause = RetentionRule | 'within' | 'active' | 'pinned';

export interface RetainedVersion {
  readonly id: string;
  /** Seconds since the epoch, as the service dates a version (`created_at`). */
  readonly createdAt: number;
  readonly active: boolean;
  /** Pinned by the user (`canopy snapshots create`): kept whatever the rules, as the active one. */
  readonly pinned?: boolean;
}

/** The ISO week of `date` in local time, as `year-Wweek` (the year the week's Thursday is in). */
function isoWeek(date: Date): string {
  const thursday = new Date(date.getFullYear(), date.getMonth(), date.getDate());
  // Monday is 0: the Thursday of the same week is 3 days after its Monday.
  thursday.setDate(thursday.getDate() + 3 - ((thursday.getDay() + 6) % 7));
  const firstOfYear = new Date(thursday.getFullYear(), 0, 1);
  const week =
    Math.floor(Math.round((thursday.getTime() - firstOfYear.getTime()) / 86_400_000) / 7) + 1;
  return `${thursday.getFullYear()}-W${week}`;
}

/** The period of `date` a rule counts in; each version is a period of its own for `last`. */
function periodOf(rule: RetentionRule, date: Date, id: string): string {
  const day = `${date.getFullYear()}-${date.getMonth() + 1}-${date.getDate()}`;
  switch (rule) {
    case 'last':
      return id;
    case 'hourly':
      return `${day} ${date.getHours()}`;
    case 'daily':
      return day;
    case 'weekly':
      return isoWeek(date);
    case 'monthly':
      return `${date.getFullYear()}-${date.getMonth() + 1}`;
    case 'yearly':
      return String(date.getFullYear());
  }
}

/** Whether `policy` keeps anything: a policy of no rules would remove every version. */
export function keepsAny(policy: RetentionPolicy): boolean {
  return RETENTION_RULES.some((rule) => (policy[rule] ?? 0) > 0) || (policy.within?.count ?? 0) > 0;
}

/**
 * The time `span` before `end`, by the calendar. A month or a year before a day the earlier
 * month lacks is its last day: a month before 31 March is the end of February, not 3 March, so
 * the span is never shorter than asked.
 */
function spanBefore(end: Date, span: RetentionSpan): number {
  const start = new Date(end);
  if (span.unit === 'month' || span.unit === 'year') {
    const months = span.unit === 'month' ? span.count : 12 * span.count;
    const day = start.getDate();
    start.setDate(1);
    start.setMonth(start.getMonth() - months);
    const lastDay = new Date(start.getFullYear(), start.getMonth() + 1, 0).getDate();
    start.setDate(Math.min(day, lastDay));
  } else if (span.unit === 'hour') start.setHours(start.getHours() - span.count);
  else start.setDate(start.getDate() - (span.unit === 'week' ? 7 : 1) * span.count);
  return start.getTime();
}

/**
 * The versions `policy` keeps, by id, each with why; those not in the map are removed. The
 * newest version of each period counts for it, so `versions` may come in any order.
 */
export function versionsKept(
  versions: readonly RetainedVersion[],
  policy: RetentionPolicy,
): Map<string, KeptBecause[]> {
  const newestFirst = [...versions].sort((a, b) => b.createdAt - a.createdAt);
  const kept = new Map<string, KeptBecause[]>();
  const keep = (id: string, because: KeptBecause): void => {
    kept.set(id, [...(kept.get(id) ?? []), because]);
  };
  for (const version of newestFirst) {
    if (version.active) keep(version.id, 'active');
    if (version.pinned === true) keep(version.id, 'pinned');
  }
  const newest = newestFirst[0];
  if (newest && policy.within && policy.within.count > 0) {
    const from = spanBefore(new Date(newest.createdAt * 1000), policy.within);
    for (const version of newestFirst)
      if (version.createdAt * 1000 >= from) keep(version.id, 'within');
  }
  for (const rule of RETENTION_RULES) {
    const count = policy[rule] ?? 0;
    const periods = new Set<string>();
    for (const version of newestFirst) {
      if (periods.size >= count) break;
      const period = periodOf(rule, new Date(version.createdAt * 1000), version.id);
      if (periods.has(period)) continue;
      periods.add(period);
      keep(version.id, rule);
    }
  }
  return kept;
}

/**
 * The policy in `json`, as policyText wrote it; undefined when it is not one (the state kept
 * it damaged, or a later Canopy wrote more than this one knows).
 */
export function policyFromText(json: string): RetentionPolicy | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const policy: Partial<Record<RetentionRule, number>> & { within?: RetentionSpan } = {};
  for (const [key, value] of Object.entries(parsed)) {
    if (key === 'within') {
      const span = value as Partial<RetentionSpan> | null;
      if (
        typeof span !== 'object' ||
        span === null ||
        !Number.isSafeInteger(span.count) ||
        !(SPAN_UNITS as readonly unknown[]).includes(span.unit)
      )
        return undefined;
      policy.within = { count: span.count as number, unit: span.unit as RetentionSpan['unit'] };
    } else if ((RETENTION_RULES as readonly string[]).includes(key)) {
      if (!Number.isSafeInteger(value) || (value as number) < 0) return undefined;
      policy[key as RetentionRule] = value as number;
    } else return undefined;
  }
  return keepsAny(policy) ? policy : undefined;
}

/** `policy` as JSON text, for the state to keep. */
export function policyText(policy: RetentionPolicy): string {
  return JSON.stringify(policy);
}

/** `policy` in words, as the options that give it: `--keep-daily 7 --keep-within 14d`. */
export function policyOptions(policy: RetentionPolicy): string {
  const words = RETENTION_RULES.flatMap((rule) => {
    const count = policy[rule];
    return count === undefined || count === 0 ? [] : [`--keep-${rule} ${count}`];
  });
  if (policy.within && policy.within.count > 0)
    words.push(`--keep-within ${policy.within.count}${policy.within.unit.charAt(0)}`);
  return words.join(' ');
}
