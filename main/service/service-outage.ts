import type { EngineError } from '../api/index.ts';
import { ServiceAnswer } from './http-errors.ts';

// A backup, a restore or a verify under way rides out an outage of the service: the service
// restarting (an update, a reboot of the machine it runs on), a router or a Wi-Fi link coming
// back, a proxy in front of the service answering 502 while the service is down. The retry
// policy alone gave up after about 4 s of that, and a backup of 600 MB stopped part way when
// its server was restarted. Past the policy's attempts, a request that cannot reach the service
// is tried on (every OUTAGE_RETRY_MS at most) until `budgetMs` after its first failure, and the
// operation says once that it waits, and once that it reached the service again.
//
// Only once the operation has reached the service: one that cannot reach it from the start
// (offline, a wrong address) says so at once rather than after minutes. Failures that asking
// again will not mend (an untrusted certificate, a proxy's refusal, a refused request, a
// damaged database answering 500 alike each time) never get here: they are not retryable.

/** What an operation waiting out an outage tells, once as the wait starts and once it ends. */
export type ServiceWait =
  | {
      readonly state: 'waiting';
      /** The failure that started the wait. */
      readonly error: EngineError;
      /** When (ms since the epoch) a request still failing is given up. */
      readonly givesUpAt: number;
    }
  | { readonly state: 'reached' };

/** The longest wait between two tries of a request riding out an outage. */
export const OUTAGE_RETRY_MS = 5000;

/** Statuses a proxy or a load balancer answers while the service behind it is down. */
const OUTAGE_STATUSES = new Set([502, 503, 504]);

/** Whether `error` says the service cannot be reached at all right now, rather than refused. */
export function isOutage(error: EngineError): boolean {
  if (!error.retryable) return false;
  if (error.code === 'network') return true;
  return (
    error.code === 'server_error' &&
    error.cause instanceof ServiceAnswer &&
    OUTAGE_STATUSES.has(error.cause.status)
  );
}

/** One operation's state against outages: shared by every request the operation makes. */
export class ServiceOutage {
  private reached = false;
  private waiting = false;

  constructor(
    private readonly budgetMs: number,
    /** The clock the budget is counted by. */
    readonly now: () => number = Date.now,
    private readonly onWait?: (wait: ServiceWait) => void,
  ) {}

  /** Notes an answer from the service: the operation reached it, and any wait is over. */
  succeeded(): void {
    this.reached = true;
    if (!this.waiting) return;
    this.waiting = false;
    this.onWait?.({ state: 'reached' });
  }

  /**
   * Whether a request whose attempts are spent, failing with `error` since `firstFailureAt`,
   * is tried again: an outage, after the operation reached the service, within the budget.
   */
  mayWait(error: EngineError, firstFailureAt: number): boolean {
    if (!this.reached || !isOutage(error)) return false;
    const givesUpAt = firstFailureAt + this.budgetMs;
    if (this.now() >= givesUpAt) return false;
    if (!this.waiting) {
      this.waiting = true;
      this.onWait?.({ state: 'waiting', error, givesUpAt });
    }
    return true;
  }
}
