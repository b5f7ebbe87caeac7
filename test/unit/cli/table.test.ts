import { describe, expect, it } from 'vitest';
import { table } from '../../../cli/command-context.ts';

describe('table', () => {
  it('pads each column to its widest cell, and leaves no space at the ends of lines', () => {
    expect(
      table([
        ['dir', '0755', '0', 'letters'],
        ['file', '0644', '12345', 'todo.txt'],
      ]),
    ).toBe('dir   0755  0      letters\nfile  0644  12345  todo.txt');
    expect(table([])).toBe('');
  });

  it('lists as many rows as a recursive listing of a large version has', () => {
    // `canopy ls -R` of 300 000 files: their widths spread into Math.max overflowed the stack.
    const rows = Array.from({ length: 300_000 }, (_, at) => ['file', String(at), `f-${at}`]);
    const lines = table(rows).split('\n');
    expect(lines).toHaveLength(300_000);
    expect(lines[0]).toBe('file  0       f-0');
    expect(lines.at(-1)).toBe('file  299999  f-299999');
  });
});
