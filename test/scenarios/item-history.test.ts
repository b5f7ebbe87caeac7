import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  unlinkSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { canopyFails, canopySucceeds, loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';

// `canopy history PATH`: a user looking for the copy of a file to restore (the report before
// an edit went wrong) gets the versions in which it differs from the version before, newest
// first, each with how it changed; the id of one restores that copy. From the local metadata
// cache while the disk holding the backups is not connected, passing over a version this
// computer keeps no copy of, and saying so.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-item-history-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const data = path.join(scratch, 'local');
const report = path.join(source, 'report.txt');

interface HistoryJson {
  path: string;
  versionsRead: number;
  changes: Array<{
    versionId: string;
    change: string;
    entry: { type: string; size: number } | null;
  }>;
  unread: Array<{ versionId: string; reason: string }>;
}

/** The versions made, oldest first. */
const versions: string[] = [];

async function backup(): Promise<void> {
  const stored = JSON.parse(
    await canopySucceeds(home, 'backup', source, '--bucket', 'Docs', '--json', '--skip-check'),
  ) as { versionId: string; unchanged: boolean };
  expect(stored.unchanged).toBe(false);
  versions.push(stored.versionId);
}

beforeAll(async () => {
  await loginWithBucket(home, data, 'Docs');
  writeSettled(report, 'first draft');
  writeSettled(path.join(source, 'notes', 'ideas.txt'), 'more charts');
  writeSettled(path.join(source, "-Ann's draft.txt"), 'not an option');
  await backup();
  writeSettled(report, 'second draft, longer');
  await backup();
  chmodSync(report, 0o600);
  await backup();
  unlinkSync(report);
  writeSettled(path.join(report, 'part-1.txt'), 'a folder now');
  await backup();
  rmSync(report, { recursive: true });
  await backup();
  // A change elsewhere: the report's history has no line for it.
  writeSettled(path.join(source, 'notes', 'ideas.txt'), 'fewer charts');
  await backup();
}, 120_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the history of one item', () => {
  it('lists the versions in which it changed, newest first, and one of them restores that copy', async () => {
    const history = JSON.parse(
      await canopySucceeds(home, 'history', 'report.txt', '--bucket', 'Docs', '--json'),
    ) as HistoryJson;
    expect(history.versionsRead).toBe(6);
    expect(history.unread).toEqual([]);
    expect(
      history.changes.map(({ versionId, change, entry }) => [
        versions.indexOf(versionId),
        change,
        entry?.type,
        entry?.size,
      ]),
    ).toEqual([
      [4, 'removed', undefined, undefined],
      [3, 'type', 'directory', 0],
      [2, 'metadata', 'file', 20],
      [1, 'modified', 'file', 20],
      [0, 'added', 'file', 11],
    ]);

    // As a user reads it, and by the path the file had on disk; with its progress in a log.
    const run = await runCanopy(home, ['history', report, '--bucket', 'Docs', '--progress'], {
      CANOPY_SECRET_STORE: 'file',
    });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/^reading versions: 0\/6\n(.*\n)*reading versions: 6\/6\n$/);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`${report} in bucket "Docs": 5 changes in 6 versions read, newest first`);
    expect(lines[1]).toMatch(/^VERSION\s+CREATED\s+CHANGE\s+TYPE\s+SIZE\s+MODIFIED$/);
    expect(lines[2]).toMatch(new RegExp(`^${versions[4] ?? ''}\\s+${TOLD_TIME}\\s+removed$`));
    expect(lines[3]).toMatch(
      new RegExp(`^${versions[3] ?? ''}\\s+${TOLD_TIME}\\s+another type\\s+dir\\s+${TOLD_TIME}$`),
    );
    expect(lines[4]).toMatch(
      new RegExp(`^${versions[2] ?? ''}\\s+${TOLD_TIME}\\s+mode or time\\s+file\\s+20\\s`),
    );
    expect(lines.at(-1)).toBe(
      `to restore a copy: canopy restore --bucket Docs --version ID --to DIR ${report}`,
    );

    const target = path.join(scratch, 'second-draft');
    await canopySucceeds(
      home,
      'restore',
      'report.txt',
      '--bucket',
      'Docs',
      '--version',
      versions[1] ?? '',
      '--to',
      target,
    );
    expect(readFileSync(path.join(target, 'report.txt'), 'utf8')).toBe('second draft, longer');
  });

  it('tells a folder changed when anything in it did, and refuses a path no version holds', async () => {
    const notes = JSON.parse(
      await canopySucceeds(home, 'history', 'notes', '--bucket', 'Docs', '--json'),
    ) as HistoryJson;
    expect(
      notes.changes.map(({ versionId, change }) => [versions.indexOf(versionId), change]),
    ).toEqual([
      [5, 'modified'],
      [0, 'added'],
    ]);
    expect(await canopyFails(home, 'history', 'report.doc', '--bucket', 'Docs')).toBe(
      'canopy: no version of bucket "Docs" holds report.doc (canopy ls shows what the active one holds)\n',
    );
    await canopySucceeds(home, 'buckets', 'create', 'Empty', '--type', 'backup', '--class', 'hot');
    expect(await canopyFails(home, 'history', 'report.txt', '--bucket', 'Empty')).toBe(
      'canopy: bucket "Empty" has no version yet\n',
    );
  });

  it('suggests a restore that a shell reads back whole, for a name that begins with a dash', async () => {
    const name = "-Ann's draft.txt";
    const shown = await canopySucceeds(home, 'history', '--bucket', 'Docs', '--', name);
    const hint = shown.trimEnd().split('\n').at(-1) ?? '';
    expect(hint).toBe(
      `to restore a copy: canopy restore --bucket Docs --version ID --to DIR -- '-Ann'\\''s draft.txt'`,
    );
    // The words of the command as bash splits them, with the version and the folder filled in.
    const target = path.join(scratch, 'draft-back');
    const words = spawnSync(
      'bash',
      ['-c', `printf '%s\\0' ${hint.replace('to restore a copy: canopy ', '')}`],
      { encoding: 'utf8' },
    ).stdout.split('\0');
    words.pop();
    const args = words.map((word) =>
      word === 'ID' ? (versions[0] ?? '') : word === 'DIR' ? target : word,
    );
    expect(args.at(-1)).toBe(name);
    await canopySucceeds(home, ...args);
    expect(readFileSync(path.join(target, name), 'utf8')).toBe('not an option');
  });

  it('reads the versions this computer keeps while the disk holding them is not connected', async () => {
    // One version's copy gone from the cache: it cannot be read until the disk is back.
    unlinkSync(path.join(home, 'metadata', `${versions[1] ?? ''}.car`));
    renameSync(data, `${data}-unplugged`);
    try {
      const run = await runCanopy(home, ['history', 'report.txt', '--bucket', 'Docs', '--json'], {
        CANOPY_SECRET_STORE: 'file',
      });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stderr).toMatch(
        new RegExp(
          `^canopy: the disk holding the backups is not connected; reading the versions as of ${TOLD_TIME} that this computer keeps\n$`,
        ),
      );
      const history = JSON.parse(run.stdout) as HistoryJson;
      expect(history.versionsRead).toBe(5);
      expect(history.unread.map((version) => version.versionId)).toEqual([versions[1]]);
      expect(history.unread[0]?.reason).toContain(`the backups of this device are not in ${data}`);
      // The second draft's change is told with the version after it, read against the first.
      expect(
        history.changes.map(({ versionId, change }) => [versions.indexOf(versionId), change]),
      ).toEqual([
        [4, 'removed'],
        [3, 'type'],
        [2, 'modified'],
        [0, 'added'],
      ]);
      // A path none of those read holds may be in the one passed over: said so.
      expect(await canopyFails(home, 'history', 'report.doc', '--bucket', 'Docs')).toContain(
        `canopy: none of the 5 versions of bucket "Docs" read holds report.doc; 1 could not be read (the backups of this device are not in ${data}`,
      );
      // None kept here at all: why none could be read.
      const cache = path.join(home, 'metadata');
      for (const name of readdirSync(cache)) rmSync(path.join(cache, name), { recursive: true });
      expect(await canopyFails(home, 'history', 'report.txt', '--bucket', 'Docs')).toContain(
        `canopy: the backups of this device are not in ${data}`,
      );
    } finally {
      renameSync(`${data}-unplugged`, data);
    }
  });

  it('follows a path on disk now back through the versions of the folder under its old name', async () => {
    const renamed = path.join(scratch, 'source (2026)');
    renameSync(source, renamed);
    await canopySucceeds(
      home,
      ...['backup', renamed, '--bucket', 'Docs', '--replace-source', '--skip-check'],
    );
    const history = JSON.parse(
      await canopySucceeds(
        home,
        ...['history', path.join(renamed, 'notes', 'ideas.txt'), '--bucket', 'Docs', '--json'],
      ),
    ) as HistoryJson;
    expect(history.versionsRead).toBe(7);
    expect(
      history.changes.map(({ versionId, change }) => [versions.indexOf(versionId), change]),
    ).toEqual([
      [5, 'modified'],
      [0, 'added'],
    ]);

    // The path on disk now names the file in those versions to ls, diff and restore too, as the
    // hint to restore a copy gives it.
    const ideas = path.join(renamed, 'notes', 'ideas.txt');
    const first = versions[0] ?? '';
    const listed = await canopySucceeds(
      home,
      ...['ls', '--bucket', 'Docs', '--version', first, path.join(renamed, 'notes')],
    );
    expect(listed).toContain('ideas.txt');
    const compared = await canopySucceeds(
      home,
      ...['diff', '--bucket', 'Docs', '--from', first, '--to', versions[5] ?? '', ideas],
    );
    expect(compared).toContain('M notes/ideas.txt');
    const copies = path.join(scratch, 'copies');
    await canopySucceeds(
      home,
      ...['restore', '--bucket', 'Docs', '--version', first, '--to', copies, ideas],
    );
    expect(readFileSync(path.join(copies, 'ideas.txt'), 'utf8')).toBe('more charts');
    // Without --to, back where the path names (deleted there since), with bytes the bucket's
    // latest version holds: restored into the bucket's folder now, not read by its next backup.
    unlinkSync(ideas);
    const told = await canopySucceeds(
      home,
      'restore',
      '--bucket',
      'Docs',
      '--version',
      versions[5] ?? '',
      ideas,
    );
    expect(readFileSync(ideas, 'utf8')).toBe('fewer charts');
    expect(told).toContain(
      `into ${path.join(renamed, 'notes')}, where its path names it now (it was backed up from ${path.join(source, 'notes')})\n`,
    );
    const after = JSON.parse(
      await canopySucceeds(home, 'backup', renamed, '--bucket', 'Docs', '--json', '--skip-check'),
    ) as { files: number; bytesRead: number };
    expect(after).toMatchObject({ files: 2, bytesRead: 0 });
  });
});
