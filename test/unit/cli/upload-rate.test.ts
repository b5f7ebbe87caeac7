import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../cli/command-context.ts';
import { uploadRate } from '../../../cli/upload-rate.ts';

// `--limit-upload RATE` as people write it: in the units Canopy prints, in binary ones, or in
// the bits an internet plan states its uplink in.

describe('the rate --limit-upload names', () => {
  it('is bytes a second, in decimal or binary units, with or without /s', () => {
    expect(uploadRate('2MB')).toBe(2_000_000);
    expect(uploadRate('500kB/s')).toBe(500_000);
    expect(uploadRate('500k')).toBe(500_000);
    expect(uploadRate('1.5MiB')).toBe(1_572_864);
    expect(uploadRate('1 GB/s')).toBe(1_000_000_000);
    expect(uploadRate('250000')).toBe(250_000);
  });

  it('takes bits as an internet plan states them', () => {
    expect(uploadRate('10Mbit')).toBe(1_250_000);
    expect(uploadRate('800kbit/s')).toBe(100_000);
  });

  it('refuses what names no rate, or one too slow to back anything up', () => {
    for (const text of ['fast', '2 MBs', '-1MB', '1e6', '0', '999', '0.5kB', 'MB', '2XB'])
      expect(() => uploadRate(text), text).toThrow(UsageError);
    expect(() => uploadRate('fast')).toThrow(
      '--limit-upload takes bytes a second (2MB, 500kB, 1.5MiB) or bits (10Mbit), at least 1kB, not "fast"',
    );
  });
});
