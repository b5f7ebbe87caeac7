// The service's problems as lines a person reads, for a server that logs no requests
// (`canopy-server serve` without --log): a request that failed (HTTP 500: a failing disk, a
// file of its data gone, a bug), work between requests that failed (a sweep, a compaction), what
// a crash left. Its clients only learn that the server failed; its operator reads why here.

/** The same problem told again within this long is counted, not repeated. */
const ALIKE_WINDOW_MS = 60_000;
/** Past this many problems remembered, those told longer ago than the window are forgotten. */
const MOST_REMEMBERED = 1000;

const LEVEL_NAMES: ReadonlyMap<number, string> = new Map([
  [40, 'warning'],
  [50, 'error'],
  [60, 'fatal'],
]);
/** Fields of every pino line, told in the line's own words or not at all. */
const FRAME_FIELDS = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'err', 'reqId', 'route']);

interface PinoError {
  readonly message?: unknown;
  readonly code?: unknown;
  readonly path?: unknown;
}

function textOf(value: unknown): string {
  return typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value);
}

/** What one JSON line of the service's log (pino's) tells, without its time. */
export function problemText(line: Record<string, unknown>): string {
  const level = typeof line['level'] === 'number' ? line['level'] : 50;
  const parts = [`${LEVEL_NAMES.get(level) ?? 'error'}: ${textOf(line['msg'])}`];
  if (typeof line['route'] === 'string') parts.push(` (${line['route']})`);
  const err = line['err'] as PinoError | undefined;
  if (err !== undefined && typeof err === 'object') {
    const message = textOf(err.message);
    // Fastify's own warnings are their error's message.
    if (message !== line['msg']) parts.push(`: ${message}`);
    // A failed read names its file only in its `path` (block-reader.ts).
    if (typeof err.path === 'string' && !message.includes(err.path)) parts.push(` '${err.path}'`);
    // Node's file system errors begin with their code; SQLite's do not (SQLITE_IOERR_FSYNC).
    if (typeof err.code === 'string' && !message.includes(err.code)) parts.push(` [${err.code}]`);
  }
  const details = Object.entries(line)
    .filter(([key]) => !FRAME_FIELDS.has(key))
    .map(([key, value]) => `${key}=${JSON.stringify(value)}`);
  if (details.length > 0) parts.push(` (${details.join(', ')})`);
  return parts.join('');
}

/**
 * A destination for the service's pino logger that writes each line to `write` as a person
 * reads it, beginning with its time; a problem told within the last minute is counted instead,
 * and the count told with it once the minute is past, so that a failing disk under a device's
 * retries does not flood the log.
 */
export function problemLogStream(write: (line: string) => void): { write(json: string): void } {
  const told = new Map<string, { at: number; alike: number }>();
  return {
    write(json: string): void {
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(json) as Record<string, unknown>;
      } catch {
        // pino writes JSON; anything else is told as it is rather than lost.
        write(json.trimEnd());
        return;
      }
      const at = typeof line['time'] === 'number' ? line['time'] : Date.now();
      const text = problemText(line);
      const before = told.get(text);
      if (before !== undefined && at - before.at < ALIKE_WINDOW_MS) {
        before.alike += 1;
        return;
      }
      const alike =
        before !== undefined && before.alike > 0
          ? ` (and ${before.alike} more alike in the minute before)`
          : '';
      write(`${new Date(at).toISOString()} ${text}${alike}`);
      told.delete(text);
      told.set(text, { at, alike: 0 });
      if (told.size > MOST_REMEMBERED)
        for (const [key, { at: toldAt }] of told) {
          if (at - toldAt < ALIKE_WINDOW_MS) break;
          told.delete(key);
        }
    },
  };
}
