import { describe, expect, it } from 'vitest';
import { isRestoredTimeOf, restoredMicroseconds } from '../../../main/protocol/restored-time.ts';

// A backup takes an entry's time on disk for the version's when a restore of the version gave
// it that time (main/packer/pack-source.ts): only the microsecond nearest, nothing else.

const IN_VERSION = 1_700_000_000_123_456_789n;

describe('the time a restore gives an entry', () => {
  it('is told from the version time it stands for, and from any other', () => {
    expect(restoredMicroseconds(IN_VERSION)).toBe(1_700_000_000_123_457n);
    expect(isRestoredTimeOf(1_700_000_000_123_457_000n, IN_VERSION)).toBe(true);
    // A microsecond either side is a change, and so is a time not of whole microseconds.
    expect(isRestoredTimeOf(1_700_000_000_123_456_000n, IN_VERSION)).toBe(false);
    expect(isRestoredTimeOf(1_700_000_000_123_458_000n, IN_VERSION)).toBe(false);
    expect(isRestoredTimeOf(1_700_000_000_123_457_001n, IN_VERSION)).toBe(false);
    // The same time is no restore's: there is nothing to take.
    expect(isRestoredTimeOf(1_700_000_000_123_457_000n, 1_700_000_000_123_457_000n)).toBe(false);
  });

  it('rounds half a microsecond to the later, before 1970 too', () => {
    expect(isRestoredTimeOf(1_000n, 500n)).toBe(true);
    expect(isRestoredTimeOf(0n, 499n)).toBe(true);
    expect(isRestoredTimeOf(-1_000n, -1_500n)).toBe(true);
    expect(isRestoredTimeOf(-2_000n, -1_501n)).toBe(true);
    expect(isRestoredTimeOf(-1_000n, -1_501n)).toBe(false);
  });
});
