import { readFileSync } from 'node:fs';
import { SourceMap, type SourceMapPayload } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// An unexpected failure's stack, told with the places in Canopy's sources rather than in the
// bundle npm run build made of them (bin/build.js): `main/restore/already-there.ts:212:9`, not
// `dist/chunks/chunk-CNZL6ZFZ.js:8605:12`, for whoever reads the report. Each bundled file's
// source map lies beside it and is read only here, as a failure is told: Node reading them
// itself (--enable-source-maps) made every command start 0.1 s later and take 40 MB more.

/** A frame's place in a file run from a URL: `file:///…/x.js:LINE:COLUMN`. */
const PLACE = /(file:\/\/[^\s()]+\.js):(\d+):(\d+)/g;

/** `stack` with each place in a file that has a source map beside it told in its source. */
export function sourceStack(stack: string): string {
  const maps = new Map<string, SourceMap | undefined>();
  return stack.replace(PLACE, (place, url: string, line: string, column: string) => {
    if (!maps.has(url)) maps.set(url, mapBeside(url));
    const origin = maps.get(url)?.findOrigin(Number(line), Number(column));
    if (!origin || !('fileName' in origin)) return place;
    const source = path.resolve(path.dirname(fileURLToPath(url)), origin.fileName);
    return `${source}:${origin.lineNumber}:${origin.columnNumber}`;
  });
}

/** The source map beside the file at `url`; undefined when there is none to read. */
function mapBeside(url: string): SourceMap | undefined {
  try {
    const payload = JSON.parse(
      readFileSync(`${fileURLToPath(url)}.map`, 'utf8'),
    ) as SourceMapPayload;
    return new SourceMap(payload);
  } catch {
    // No map (a package's own file, the sources run through tsx) or none that parses: the
    // place is told as it is, rather than a failure in telling one hide the failure told.
    return undefined;
  }
}
