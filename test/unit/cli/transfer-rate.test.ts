import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../cli/command-context.ts';
import { transferRate } from '../../../cli/transfer-rate.ts';

// `--limit-upload RATE` as people write it: in the units Canopy prints, in binary ones, or in
// the bits an internet plan states its uplink in.

const upload = (text: string): number => transferRate('limit-upload', text);

describe('the rate --limit-upload and --limit-download name', () => {
  it('is bytes a second, in decimal or binary units, with or without /s', () => {
    expect(upload('2MB')).toBe(2_000_000);
    expect(upload('500kB/s')).toBe(500_000);
    expect(upload('500k')).toBe(500_000);
    expect(upload('1.5MiB')).toBe(1_572_864);
    expect(upload('1 GB/s')).toBe(1_000_000_000);
    expect(upload('250000')).toBe(250_000);
  });

  it('takes bits as an internet plan states them', () => {
    expect(upload('10Mbit')).toBe(1_250_000);
    expect(upload('800kbit/s')).toBe(100_000);
  });

  it('refuses what names no rate, or one too slow to back anything up', () => {
    for (const text of ['fast', '2 MBs', '-1MB', '1e6', '0', '999', '0.5kB', 'MB', '2XB'])
      expect(() => upload(text), text).toThrow(UsageError);
    expect(() => transferRate('limit-download', 'fast')).toThrow(
      '--limit-download takes bytes a second (2MB, 500kB, 1.5MiB) or bits (10Mbit), at least 1kB, not "fast"',
    );
  });
});
