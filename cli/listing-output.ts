// A long listing written a part at a time (`canopy ls -R` of a version of 300 000 files): as
// table() lays it out, or with --json as the one JSON array JSON.stringify would make of it,
// without its rows, its padded cells or the whole text ever held at once. Made whole, they
// took more memory than the version's tree itself.

/** Lines (or JSON) written to the output this many at a time. */
const LINES_A_WRITE = 1000;

/**
 * `items` as table() lays out their cells, line by line: each item's cells are made twice, once
 * to measure the columns and once to write them, rather than held for every item at once.
 */
export function* tableLines<T>(
  items: readonly T[],
  cellsOf: (item: T) => readonly string[],
): Generator<string> {
  const widths: number[] = [];
  for (const item of items)
    for (const [column, cell] of cellsOf(item).entries())
      widths[column] = Math.max(widths[column] ?? 0, cell.length);
  for (const item of items)
    yield cellsOf(item)
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join('  ')
      .trimEnd();
}

/** `lines`, each ended by a newline (one blank line for none, as print('') writes), in parts. */
export function* linesInParts(lines: Iterable<string>): Generator<string> {
  let part: string[] = [];
  let any = false;
  for (const line of lines) {
    any = true;
    part.push(line);
    if (part.length === LINES_A_WRITE) {
      yield `${part.join('\n')}\n`;
      part = [];
    }
  }
  if (part.length > 0 || !any) yield `${part.join('\n')}\n`;
}

/** `items` as one line of JSON, exactly JSON.stringify(items) and a newline, in parts. */
export function* jsonArrayInParts(items: readonly unknown[]): Generator<string> {
  for (let start = 0; start < items.length || start === 0; start += LINES_A_WRITE) {
    const part = items
      .slice(start, start + LINES_A_WRITE)
      .map((item) => JSON.stringify(item) ?? 'null')
      .join(',');
    const last = start + LINES_A_WRITE >= items.length;
    yield `${start === 0 ? '[' : ','}${part}${last ? ']\n' : ''}`;
  }
}
