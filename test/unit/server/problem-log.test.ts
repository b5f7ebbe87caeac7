import { describe, expect, it } from 'vitest';
import { problemLogStream } from '../../../server/problem-log.ts';

// What the operator of a server run without --log reads on its stderr, from the lines its
// logger writes.

const START = Date.UTC(2026, 11, 1, 9, 0, 0);

function failedRequest(at: number, file: string): string {
  return JSON.stringify({
    level: 50,
    time: at,
    pid: 7,
    hostname: 'nas',
    reqId: 'req-1',
    route: 'GET /api/v1/buckets/metadata/:metadata_id/pull',
    err: {
      type: 'Error',
      message: `ENOENT: no such file or directory, open '${file}'`,
      code: 'ENOENT',
      stack: 'Error: ENOENT …',
    },
    msg: 'request failed',
  });
}

function linesOf(feed: (stream: { write(json: string): void }) => void): string[] {
  const lines: string[] = [];
  feed(problemLogStream((line) => lines.push(line)));
  return lines;
}

describe('problem log', () => {
  it('tells a problem once a minute, with how often it came meanwhile', () => {
    const lines = linesOf((stream) => {
      for (const second of [0, 1, 30, 59])
        stream.write(failedRequest(START + second * 1000, '/d/a'));
      stream.write(failedRequest(START + 61_000, '/d/a'));
    });
    expect(lines).toEqual([
      "2026-12-01T09:00:00.000Z error: request failed (GET /api/v1/buckets/metadata/:metadata_id/pull): ENOENT: no such file or directory, open '/d/a'",
      "2026-12-01T09:01:01.000Z error: request failed (GET /api/v1/buckets/metadata/:metadata_id/pull): ENOENT: no such file or directory, open '/d/a' (and 3 more alike in the minute before)",
    ]);
  });

  it('tells each different problem at once', () => {
    const lines = linesOf((stream) => {
      stream.write(failedRequest(START, '/d/a'));
      stream.write(failedRequest(START + 1, '/d/b'));
    });
    expect(lines.map((line) => line.slice(-6))).toEqual(["'/d/a'", "'/d/b'"]);
  });

  it('names the file a failed read was of', () => {
    const lines = linesOf((stream) => {
      stream.write(
        JSON.stringify({
          level: 50,
          time: START,
          err: { message: 'EIO: i/o error, read', code: 'EIO', path: '/srv/canopy/packs/p.pack' },
          msg: 'blocks/car failed mid-answer',
        }),
      );
    });
    expect(lines).toEqual([
      "2026-12-01T09:00:00.000Z error: blocks/car failed mid-answer: EIO: i/o error, read '/srv/canopy/packs/p.pack'",
    ]);
  });

  it("names a database's error code, and the details of a warning", () => {
    const lines = linesOf((stream) => {
      stream.write(
        JSON.stringify({
          level: 50,
          time: START,
          err: { message: 'disk I/O error', code: 'SQLITE_IOERR_FSYNC' },
          msg: 'sweep failed',
        }),
      );
      stream.write(
        JSON.stringify({
          level: 40,
          time: START,
          staged: 2,
          orphanPacks: 1,
          msg: 'removed staged files, uncommitted packs and upload pins left by a crash',
        }),
      );
    });
    expect(lines).toEqual([
      '2026-12-01T09:00:00.000Z error: sweep failed: disk I/O error [SQLITE_IOERR_FSYNC]',
      '2026-12-01T09:00:00.000Z warning: removed staged files, uncommitted packs and upload pins left by a crash (staged=2, orphanPacks=1)',
    ]);
  });
});
