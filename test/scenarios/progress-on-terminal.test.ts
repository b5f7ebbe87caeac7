import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { canopyProcess } from '../helpers/canopy-command-line.ts';
import { onTerminal } from '../helpers/on-terminal.ts';

// On a terminal, a backup's progress is one line rewritten in place. A line wider than the
// terminal wraps onto a second row, which the next rewrite does not reach: each report then
// left a row behind. So each is cut to the terminal's width.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-progress-terminal-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };

describe('progress on a narrow terminal', () => {
  it('keeps each report within one row', async () => {
    const home = path.join(scratch, 'home');
    const source = path.join(scratch, 'videos');
    mkdirSync(source);
    for (let i = 0; i < 3; i += 1)
      writeFileSync(path.join(source, `clip-${i}.mov`), randomBytes(1 << 20));
    expect((await runCanopy(home, ['login', '--local'], env)).status).toBe(0);
    expect((await runCanopy(home, ['buckets', 'create', 'Videos'], env)).status).toBe(0);
    const canopy = canopyProcess(
      ['backup', source, '--bucket', 'Videos', '--limit-upload', '1MB'],
      { ...process.env, CANOPY_HOME: home, ...env },
    );
    const terminal = onTerminal(canopy.command, canopy.args, canopy.env, { columns: 40 });
    const ended = await terminal.ended;
    expect(ended, ended.shown).toMatchObject({ code: 0 });
    // Each report is a carriage return, the line, then an erase to the end of the row (ESC [K).
    const reports = ended.shown
      .split('\r')
      .filter((part) => part.includes('\u001b[K'))
      .map((part) => part.slice(0, part.indexOf('\u001b[K')))
      .filter((report) => report !== '');
    expect(reports.length).toBeGreaterThan(2);
    expect(reports.filter((report) => report.length > 39)).toEqual([]);
    // The long ones, cut: what they begin with is still there.
    expect(reports.some((report) => /^uploading: .*…$/.test(report))).toBe(true);
  });
});
