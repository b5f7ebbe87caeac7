import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { BackupLock } from '../../main/state/index.ts';
import Database from 'better-sqlite3';
import {
  canopyFails,
  canopyRefusesUsage,
  canopySucceeds as canopy,
  localHomeWithBucket,
  runCanopy,
  versionsListed,
} from '../helpers/canopy-cli.ts';
import { runHelper } from '../helpers/helper-process.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { storedDataBytes } from '../helpers/stored-blocks.ts';
import { backupWithReadsFailing } from '../helpers/failing-disk.ts';
import { startTestService } from '../helpers/test-service.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';

// A user whose backup bucket keeps every version (each pinned by its snapshot) frees room with
// a retention policy, as restic's `forget --keep-*` does: `canopy versions prune` removes every
// version no rule keeps, with its data no other version holds, and leaves the rest restorable.
// Which version each rule keeps by hour, day, week, month and year is counted in the unit tests
// (test/unit/engine/retention-policy.test.ts): the service dates versions by its own clock.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-pruning-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const MB = 1_000_000;
const FILE_SECRETS = { CANOPY_SECRET_STORE: 'file' };

/** A home logged in to its own embedded service, with a backup bucket named `bucket`. */
function loggedIn(name: string, bucket: string) {
  return localHomeWithBucket(path.join(scratch, name), bucket);
}

describe('pruning versions by a retention policy', () => {
  it('tells first with --dry-run, then removes the versions no rule keeps, freeing their data', async () => {
    const { run, home, data, source } = await loggedIn('photos', 'Photos');
    // Each version holds a photo of its own, 2 MB.
    for (const photo of ['first', 'second', 'third', 'fourth']) {
      rmSync(path.join(source, 'photo.bin'), { force: true });
      writeSettled(path.join(source, 'photo.bin'), randomBytes(2 * MB));
      writeSettled(path.join(source, 'which.txt'), `${photo}\n`);
      await canopy(home, 'backup', source, '--bucket', 'Photos', '--skip-check');
    }
    const [fourth, third, second, first] = await versionsListed(home, 'Photos');
    if (!fourth || !third || !second || !first) throw new Error('four versions expected');

    const told = await canopy(
      home,
      ...['versions', 'prune', '--bucket', 'Photos', '--keep-last', '2', '--dry-run'],
    );
    expect(told).toMatch(
      new RegExp(
        [
          '^would keep 2 and remove 2 of the 4 versions of bucket "Photos" stored whole:',
          `keep +${fourth.id} +${TOLD_TIME} +active, last`,
          `keep +${third.id} +${TOLD_TIME} +last`,
          `remove +${second.id} +${TOLD_TIME}`,
          `remove +${first.id} +${TOLD_TIME}\n$`,
        ].join('\n'),
      ),
    );
    // Nothing removed by the dry run.
    expect(await versionsListed(home, 'Photos')).toHaveLength(4);
    const before = storedDataBytes(data);

    const said = await canopy(home, 'versions', 'prune', '--bucket', 'Photos', '--keep-last', '2');
    // Oldest first, each as it goes.
    expect(said).toMatch(
      new RegExp(
        `^removed version ${first.id} \\(${TOLD_TIME}\\)\nremoved version ${second.id} \\(${TOLD_TIME}\\)\nkept 2 versions of bucket "Photos" and removed 2: their data no other version holds is freed\n$`,
      ),
    );
    expect((await versionsListed(home, 'Photos')).map((version) => version.id)).toEqual([
      fourth.id,
      third.id,
    ]);
    expect(before - storedDataBytes(data)).toBeGreaterThanOrEqual(4 * MB);
    const back = path.join(run, 'third');
    await canopy(home, 'restore', '--bucket', 'Photos', '--version', third.id, '--to', back);
    expect(readFileSync(path.join(back, 'which.txt'), 'utf8')).toBe('third\n');

    // All made within the hour before the newest: none would go.
    expect(
      await canopy(
        home,
        ...['versions', 'prune', '--bucket', 'Photos', '--keep-within', '1h', '--dry-run'],
      ),
    ).toMatch(
      new RegExp(
        `^would keep 2 and remove 0 of the 2 versions .*\nkeep +${fourth.id} +${TOLD_TIME} +active, within\nkeep +${third.id} +${TOLD_TIME} +within\n$`,
      ),
    );
    // The same policy again keeps what it kept.
    expect(
      JSON.parse(
        await canopy(home, 'versions', 'prune', '--bucket', 'Photos', '--keep-last', '2', '--json'),
      ),
    ).toMatchObject({
      kept: [
        { version: { id: fourth.id }, because: ['active', 'last'] },
        { version: { id: third.id }, because: ['last'] },
      ],
      removed: [],
    });
  });

  it('refuses a policy that keeps nothing, and while a backup runs; a version uploading stays', async () => {
    const { home, source } = await loggedIn('refused', 'Crash');
    expect(await canopyRefusesUsage(home, 'versions', 'prune', '--bucket', 'Crash')).toContain(
      'bucket "Crash" has no retention policy set here: give --keep-last, --keep-hourly',
    );
    expect(
      await canopyRefusesUsage(home, 'versions', 'prune', '--bucket', 'Crash', '--keep-last', '0'),
    ).toContain('a retention policy must keep some versions');
    expect(
      await canopyRefusesUsage(
        home,
        'versions',
        'prune',
        '--bucket',
        'Crash',
        '--keep-daily',
        'all',
      ),
    ).toContain('--keep-daily must be a whole number, not "all"');
    expect(
      await canopyRefusesUsage(
        home,
        'versions',
        'prune',
        '--bucket',
        'Crash',
        '--keep-within',
        '2 weeks',
      ),
    ).toContain(
      '--keep-within takes a whole number and a unit, h(ours), d(ays), w(eeks), m(onths) or y(ears), as 14d or 6m; not "2 weeks"',
    );
    expect(
      await canopyRefusesUsage(home, 'versions', '--bucket', 'Crash', '--keep-last', '1'),
    ).toContain(
      'versions list does not take --keep-last (versions prune and versions policy take it)',
    );
    expect(await canopy(home, 'versions', 'prune', '--bucket', 'Crash', '--keep-last', '1')).toBe(
      'bucket "Crash" has no version stored whole: nothing to prune\n',
    );

    writeSettled(path.join(source, 'a.txt'), 'stored whole\n');
    await canopy(home, 'backup', source, '--bucket', 'Crash', '--skip-check');
    for (let part = 0; part < 3; part += 1)
      writeSettled(path.join(source, `part-${part}.bin`), randomBytes(1 << 20));
    // A backup killed once its version was pushed, before any data went.
    const crashed = await runHelper('crashing-backup', [home, source, 'shard:0']).exited;
    expect(crashed.signal).toBe('SIGKILL');
    const [pending, stored] = await versionsListed(home, 'Crash');
    expect(pending?.state).toBe('pending');

    const [bucket] = JSON.parse(await canopy(home, 'buckets', '--json')) as Array<{ id: string }>;
    const backupRunning = BackupLock.tryAcquire(home, bucket?.id ?? '');
    try {
      const busy = await runCanopy(
        home,
        ['versions', 'prune', '--bucket', 'Crash', '--keep-last', '1'],
        FILE_SECRETS,
      );
      expect(busy.status).toBe(1);
      expect(busy.stderr).toContain(
        'a backup to bucket "Crash" is running; stop it or wait for it to finish, then prune the versions',
      );
    } finally {
      backupRunning?.release();
    }
    // The pending version is neither counted nor removed: the next backup finishes it.
    expect(await canopy(home, 'versions', 'prune', '--bucket', 'Crash', '--keep-last', '1')).toBe(
      'kept 1 version of bucket "Crash" and removed 0\n',
    );
    expect((await versionsListed(home, 'Crash')).map((version) => version.id)).toEqual([
      pending?.id,
      stored?.id,
    ]);
    expect(await canopy(home, 'backup', source, '--bucket', 'Crash', '--skip-check')).toContain(
      `finished the interrupted upload of version ${pending?.id ?? ''}`,
    );
  });

  it('applies the policy set for the bucket after each backup from here, but not to a version lacking a file it could not read', async () => {
    const { home, source } = await loggedIn('policy', 'Notes');
    expect(await canopy(home, 'versions', 'policy', '--bucket', 'Notes')).toBe(
      'bucket "Notes" has no retention policy set here: its backups from here remove no version\n',
    );
    expect(
      await canopy(home, 'versions', 'policy', '--bucket', 'Notes', '--keep-last', '2'),
    ).toContain('set the retention policy of bucket "Notes": --keep-last 2; every backup');
    expect(await canopy(home, 'versions', 'policy', '--bucket', 'Notes', '--json')).toBe(
      `${JSON.stringify({ policy: { last: 2 } })}\n`,
    );
    const note = path.join(source, 'note.txt');
    const said: string[] = [];
    for (const text of ['first', 'second', 'third']) {
      writeSettled(note, `the ${text} note\n`);
      said.push(await canopy(home, 'backup', source, '--bucket', 'Notes', '--skip-check'));
    }
    const [first, second, third] = said.map((line) => /^version (\S+)\n/.exec(line)?.[1]);
    expect(said.slice(0, 2).join('')).not.toContain('retention policy');
    expect(said[2]).toContain(
      `removed 1 older version by the bucket's retention policy (--keep-last 2): ${first ?? ''}\n`,
    );
    expect((await versionsListed(home, 'Notes')).map((version) => version.id)).toEqual([
      third,
      second,
    ]);

    // A disk failing to read a new file: the versions before may hold what this one lacks.
    writeSettled(note, 'the fourth note\n');
    writeSettled(path.join(source, 'scan.pdf'), randomBytes(1000));
    const failing = backupWithReadsFailing(home, source, 'Notes', 'scan.pdf', 'EIO');
    expect(failing.status).toBe(3);
    expect(failing.stdout).toContain(
      "did not apply the bucket's retention policy: the version lacks an item it could not read, which the versions before it may hold\n",
    );
    const [fourth] = (await versionsListed(home, 'Notes')).map((version) => version.id);
    expect(await versionsListed(home, 'Notes')).toHaveLength(3);
    // Pruned with no rules given: the policy set.
    expect(await canopy(home, 'versions', 'prune', '--bucket', 'Notes')).toMatch(
      new RegExp(`^removed version ${second ?? ''} .*\nkept 2 versions of bucket "Notes"`),
    );
    expect((await versionsListed(home, 'Notes')).map((version) => version.id)).toEqual([
      fourth,
      third,
    ]);

    // One this Canopy cannot read (a later one set a rule it does not know) is applied not at all.
    const state = new Database(path.join(home, 'state.sqlite'));
    const kept = state.prepare('SELECT policy FROM retention_policies').pluck().get() as string;
    state.prepare('UPDATE retention_policies SET policy = ?').run('{"last":2,"tagged":"keep"}');
    state.close();
    expect(await canopyFails(home, 'versions', 'prune', '--bucket', 'Notes')).toContain(
      'the retention policy set here for bucket "Notes" is not one this Canopy can read: set it again',
    );
    const unread = new Database(path.join(home, 'state.sqlite'));
    unread.prepare('UPDATE retention_policies SET policy = ?').run(kept);
    unread.close();

    expect(await canopy(home, 'versions', 'policy', '--bucket', 'Notes', '--clear')).toBe(
      'cleared the retention policy of bucket "Notes": its backups from here remove no version\n',
    );
    writeSettled(note, 'the fifth note\n');
    expect(await canopy(home, 'backup', source, '--bucket', 'Notes', '--skip-check')).not.toContain(
      'retention policy',
    );
    expect(await versionsListed(home, 'Notes')).toHaveLength(3);
  });

  it('stores the backup when the policy cannot be applied, and says what it removed before', async () => {
    /** DELETE requests the service still answers; after them it refuses. */
    let deletesAllowed = Infinity;
    // A service that stops deleting part-way, as one whose administrator locked its snapshots.
    const service = await startTestService({ limits: DEFAULT_LIMITS }, (app) => {
      app.addHook('onRequest', async (request, reply) => {
        if (request.method !== 'DELETE') return;
        if (deletesAllowed > 0) deletesAllowed -= 1;
        else await reply.code(409).send({ msg: 'snapshots are locked', code: 'conflict' });
      });
    });
    try {
      const run = path.join(scratch, 'locked');
      const home = path.join(run, 'home');
      const source = path.join(run, 'source');
      mkdirSync(source, { recursive: true });
      const { code } = service.addUser('locked@example.org');
      await canopy(home, 'login', '--server', service.url, '--code', code);
      await canopy(home, 'buckets', 'create', 'Locked', '--type', 'backup', '--class', 'hot');
      for (const text of ['first', 'second', 'third']) {
        writeSettled(path.join(source, 'a.txt'), `${text}\n`);
        await canopy(home, 'backup', source, '--bucket', 'Locked', '--skip-check');
      }
      const [, , first] = (await versionsListed(home, 'Locked')).map((version) => version.id);
      await canopy(home, 'versions', 'policy', '--bucket', 'Locked', '--keep-last', '1');
      // The oldest version's snapshot and the version itself go; then the service refuses.
      deletesAllowed = 2;
      writeSettled(path.join(source, 'a.txt'), 'fourth\n');
      const backup = await runCanopy(
        home,
        ['backup', source, '--bucket', 'Locked', '--skip-check'],
        FILE_SECRETS,
      );
      expect(backup.status).toBe(0);
      expect(backup.stdout).toMatch(/^version \S+\n/);
      expect(backup.stderr).toMatch(
        new RegExp(
          `^canopy: the version is stored, but the retention policy set for bucket "Locked" could not be applied \\(after removing ${first ?? ''}\\): .*snapshots are locked.*; \`canopy versions prune --bucket Locked\` applies it\n$`,
        ),
      );
      expect(await versionsListed(home, 'Locked')).toHaveLength(3);
    } finally {
      await service.close();
    }
  });
});
