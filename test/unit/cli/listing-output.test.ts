import { describe, expect, it } from 'vitest';
import { table } from '../../../cli/command-context.ts';
import { jsonArrayInParts, linesInParts, tableLines } from '../../../cli/listing-output.ts';

// A long listing written in parts reads exactly as the whole text or JSON would have.

const rows = (count: number): string[][] =>
  Array.from({ length: count }, (_, index) => [
    index % 7 === 0 ? 'dir' : 'symlink',
    String(index * 37),
    `name ${index}`,
  ]);

describe('a listing written in parts', () => {
  it('is laid out as the whole table, the widest cell of each column setting its width', () => {
    for (const count of [1, 3, 1000, 2500]) {
      const cells = rows(count);
      const written = [...linesInParts(tableLines(cells, (row) => row))].join('');
      expect(written).toBe(`${table(cells)}\n`);
    }
  });

  it('is a blank line when there is nothing to list, as the whole text was', () => {
    expect([...linesInParts(tableLines([], () => []))]).toEqual(['\n']);
  });

  it('writes a thousand lines at a time', () => {
    const parts = [...linesInParts(Array.from({ length: 2500 }, (_, index) => `line ${index}`))];
    expect(parts.map((part) => part.split('\n').length - 1)).toEqual([1000, 1000, 500]);
  });

  it('with --json is the one line JSON.stringify makes of the whole array', () => {
    for (const count of [0, 1, 999, 1000, 1001, 2500]) {
      const items = rows(count).map(([type, size, name]) => ({ type, size: Number(size), name }));
      const parts = [...jsonArrayInParts(items)];
      expect(parts.join('')).toBe(`${JSON.stringify(items)}\n`);
      expect(parts).toHaveLength(Math.max(1, Math.ceil(count / 1000)));
    }
  });
});
