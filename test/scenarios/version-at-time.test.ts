import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import os from 'node:os';
import path from 'node:path';
import { canopySucceeds, loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// `--at TIME`: a user remembers when a file was still right, not a version's id. `canopy ls`,
// `restore` and `verify` read the newest version made by then, and say which one that is and
// when it was made; a time before the first version, or one written wrong, is refused.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-version-at-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const data = path.join(scratch, 'local');
// Half an hour off any whole-hour zone: a time told in UTC, or in the zone the tests run in,
// cannot pass for one told on this computer's clock.
const ZONE = 'Asia/Kolkata';
const env = { CANOPY_SECRET_STORE: 'file', TZ: ZONE };

interface Version {
  id: string;
  created_at: number;
  snapshot_id: string | null;
}
/** Oldest first. */
let versions: Version[] = [];

const iso = (seconds: number): string => new Date(seconds * 1000).toISOString();
/** A time as canopy tells it: on the computer's clock (ZONE), to the second. */
const shown = (seconds: number): string =>
  new Intl.DateTimeFormat('sv-SE', {
    timeZone: ZONE,
    ...{ year: 'numeric', month: '2-digit', day: '2-digit' },
    ...{ hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' },
  }).format(new Date(seconds * 1000));

beforeAll(async () => {
  await loginWithBucket(home, data, 'Docs');
  writeSettled(path.join(source, 'note.txt'), 'first');
  await canopySucceeds(home, 'backup', source, '--bucket', 'Docs', '--skip-check');
  // Versions are dated to the second.
  await sleep(1100);
  writeSettled(path.join(source, 'note.txt'), 'second draft');
  await canopySucceeds(home, 'backup', source, '--bucket', 'Docs', '--skip-check');
  versions = (
    JSON.parse(await canopySucceeds(home, 'versions', '--bucket', 'Docs', '--json')) as Version[]
  ).reverse();
}, 60_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a version chosen by a time', () => {
  it('is the newest made by then, for ls, restore and verify, each saying which', async () => {
    const [first, second] = versions;
    if (!first || !second) throw new Error('two versions were made');
    const told = `canopy: version ${first.id}, made ${shown(first.created_at)}, the newest at ${shown(first.created_at)}\n`;
    expect(shown(first.created_at)).not.toContain(iso(first.created_at).slice(11, 16));

    // The time told, typed back on the same computer, names the same version.
    const listed = await runCanopy(
      home,
      ['ls', '--bucket', 'Docs', '--at', shown(first.created_at), '--json'],
      env,
    );
    expect(listed.stderr).toBe(told);
    expect(JSON.parse(listed.stdout)).toMatchObject([{ name: 'note.txt', size: 5 }]);

    const out = path.join(scratch, 'first');
    const restored = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--at', iso(first.created_at), '--to', out, 'note.txt'],
      env,
    );
    expect(restored.stderr).toBe(told);
    expect(readFileSync(path.join(out, 'note.txt'), 'utf8')).toBe('first');

    const verified = await runCanopy(
      home,
      ['verify', '--bucket', 'Docs', '--at', iso(first.created_at), '--all'],
      env,
    );
    expect(verified.stdout).toContain(`of version ${first.id}: restorable as of`);

    // A day alone is all of it: today's latest version.
    const today = shown(Date.now() / 1000).slice(0, 10);
    const latest = path.join(scratch, 'latest');
    const restoredToday = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--at', today, '--to', latest],
      env,
    );
    expect(restoredToday.status, restoredToday.stderr).toBe(0);
    expect(readFileSync(path.join(latest, 'note.txt'), 'utf8')).toBe('second draft');
  });

  it('is chosen among the versions as last seen while the disk holding them is not connected', async () => {
    const [first] = versions;
    if (!first) throw new Error('a version was made');
    renameSync(data, `${data}-unplugged`);
    try {
      const listed = await runCanopy(
        home,
        ['ls', '--bucket', 'Docs', '--at', iso(first.created_at), '--json'],
        env,
      );
      expect(listed.status, listed.stderr).toBe(0);
      expect(listed.stderr).toMatch(
        new RegExp(
          `^canopy: version ${first.id}, made ${shown(first.created_at)}, the newest at ${shown(first.created_at)} \\(the disk holding the backups is not connected: chosen among the bucket's versions as seen at \\d{4}-[^)]+\\)\n$`,
        ),
      );
      expect(JSON.parse(listed.stdout)).toMatchObject([{ name: 'note.txt', size: 5 }]);
    } finally {
      renameSync(`${data}-unplugged`, data);
    }
  });

  it('verifies the version a snapshot names, as ls and restore take it', async () => {
    const [first] = versions;
    const verified = await canopySucceeds(
      home,
      ...['verify', '--bucket', 'Docs', '--snapshot', first?.snapshot_id ?? ''],
    );
    expect(verified).toContain(`of version ${first?.id ?? ''}: restorable as of`);
  });

  it('is refused before the first version, and for a time written wrong', async () => {
    const [first] = versions;
    if (!first) throw new Error('a version was made');
    const before = iso(first.created_at - 1);
    const refused = await runCanopy(home, ['ls', '--bucket', 'Docs', '--at', before], env);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(
      `canopy: bucket "Docs" has no version from ${shown(first.created_at - 1)} or before: its oldest is from ${shown(first.created_at)}\n`,
    );
    const wrong = await runCanopy(home, ['restore', '--bucket', 'Docs', '--at', '30/11/2026'], env);
    expect(wrong.status).toBe(2);
    expect(wrong.stderr).toContain('--at takes a day (2026-11-20) or a time');
    const both = await runCanopy(
      home,
      ['ls', '--bucket', 'Docs', '--at', before, '--version', first.id],
      env,
    );
    expect(both.status).toBe(2);
    expect(both.stderr).toBe(
      'canopy: --at chooses the version itself: give it without --version or --snapshot\n',
    );
  });
});
