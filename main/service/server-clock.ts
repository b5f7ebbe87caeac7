// The service's clock, as this device best knows it: its own clock, moved by the offset the
// service's answers show when the two disagree. A device JWT is judged by the service's clock
// (§5.1: issued no later than 20 s ahead of it, expired 5 min after), so a computer whose clock
// is off by more than that had every request refused as if its key were revoked; and an
// upload's window (§10.2) ends by the service's clock too. Every answer's `Date` header says the
// service's time to the second: off by more than TOLERANCE_MS, this device takes that as the
// time, and the request refused for it is signed again (ServiceClient).

/** Disagreement taken as the answer's transit and the header's whole seconds, not a wrong clock. */
const TOLERANCE_MS = 10_000;

export class ServerClock {
  /** Added to this device's clock. */
  private offsetMs = 0;

  constructor(private readonly localNow: () => number = Date.now) {}

  /** The service's time now, as best known. */
  now(): number {
    return this.localNow() + this.offsetMs;
  }

  /** How far this device's clock is behind the service's (negative: ahead), as best known. */
  get offset(): number {
    return this.offsetMs;
  }

  /**
   * Takes the time an answer's `Date` header states; returns whether the time known moved,
   * so a request refused for its token's times is worth signing again.
   */
  observe(dateHeader: string | null): boolean {
    if (dateHeader === null) return false;
    const stated = Date.parse(dateHeader);
    if (Number.isNaN(stated)) return false;
    // The header drops the milliseconds: the middle of its second is the best guess.
    const skew = stated + 500 - this.now();
    if (Math.abs(skew) <= TOLERANCE_MS) return false;
    this.offsetMs += skew;
    return true;
  }
}
