import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { canopyFails, canopySucceeds as canopy, versionsListed } from '../helpers/canopy-cli.ts';
import { runHelper } from '../helpers/helper-process.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';

// A user keeps a version they care about ("the draft before I rewrote it") in an interactive
// bucket, where the service prunes outdated versions past the few it keeps: `canopy snapshots
// create` pins it, and it outlives the versions made after it until its snapshot is deleted.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-pinning-'));
let service: TestService;

beforeAll(async () => {
  // One unpinned outdated version kept, so that pruning shows after a few backups.
  service = await startTestService({ limits: DEFAULT_LIMITS, outdatedVersionsKept: 1 });
});
afterAll(async () => {
  await service.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** A home of a new user of the service, with a bucket named `bucket` of `type`. */
async function loggedIn(name: string, bucket: string, type: 'backup' | 'interactive') {
  const run = path.join(scratch, name);
  const home = path.join(run, 'home');
  const source = path.join(run, 'source');
  mkdirSync(source, { recursive: true });
  const { code } = service.addUser(`${name}@example.org`);
  await canopy(home, 'login', '--server', service.url, '--code', code);
  await canopy(home, 'buckets', 'create', bucket, '--type', type, '--class', 'hot');
  return { run, home, source };
}

describe('pinning a version with a snapshot', () => {
  it('keeps it past the pruning of the outdated versions made after it', async () => {
    const { run, home, source } = await loggedIn('drafts', 'Drafts', 'interactive');
    const draft = path.join(source, 'draft.txt');
    writeSettled(draft, 'the first draft\n');
    await canopy(home, 'backup', source, '--bucket', 'Drafts', '--skip-check');
    const [first] = await versionsListed(home, 'Drafts');
    if (first === undefined) throw new Error('one version expected');
    // An interactive bucket's versions are not pinned by themselves.
    expect(first.snapshot_id).toBeNull();

    // The active version, by default.
    const said = await canopy(home, 'snapshots', 'create', '--bucket', 'Drafts');
    const snapshot = /snapshot (\S+) \(completed\) pins it/.exec(said)?.[1] ?? '';
    expect(said).toBe(
      `version ${first.id} is kept: snapshot ${snapshot} (completed) pins it, and the server keeps it until that snapshot is deleted\n`,
    );
    expect(await canopy(home, 'versions', '--bucket', 'Drafts')).toMatch(
      new RegExp(`^${first.id} +active +.* +yes$`, 'm'),
    );
    expect(await canopy(home, 'snapshots', '--bucket', 'Drafts')).toMatch(
      new RegExp(`^${snapshot} +${first.id} +completed +${TOLD_TIME} +16 B$`, 'm'),
    );
    // Asked again, by the start of its id: kept already, by the same snapshot.
    const again = JSON.parse(
      await canopy(
        home,
        'snapshots',
        'create',
        first.id.slice(0, 8),
        '--bucket',
        'Drafts',
        '--json',
      ),
    ) as unknown;
    expect(again).toMatchObject({
      versionId: first.id,
      keptAlready: true,
      snapshot: { id: snapshot, metadata_id: first.id, state: 'completed' },
    });

    // Three rewrites: the service keeps one unpinned outdated version, so the second goes.
    for (const text of ['second', 'third', 'fourth']) {
      writeSettled(draft, `the ${text} draft\n`);
      await canopy(home, 'backup', source, '--bucket', 'Drafts', '--skip-check');
    }
    const versions = await versionsListed(home, 'Drafts');
    expect(versions).toHaveLength(3);
    expect(versions.at(-1)).toMatchObject({
      id: first.id,
      state: 'outdated',
      snapshot_id: snapshot,
    });
    expect(await canopy(home, 'versions', '--bucket', 'Drafts')).toMatch(
      new RegExp(`^${first.id} +outdated +.* +yes$`, 'm'),
    );
    const back = path.join(run, 'back');
    await canopy(home, 'restore', '--bucket', 'Drafts', '--version', first.id, '--to', back);
    expect(readFileSync(path.join(back, 'draft.txt'), 'utf8')).toBe('the first draft\n');

    // Pinned by the user, a retention policy keeps it too.
    expect(
      await canopy(
        home,
        'versions',
        'prune',
        '--bucket',
        'Drafts',
        '--keep-last',
        '1',
        '--dry-run',
      ),
    ).toMatch(new RegExp(`^keep +${first.id} +${TOLD_TIME} +pinned$`, 'm'));

    // Unpinned, it is past the one the service keeps, and goes.
    expect(await canopy(home, 'snapshots', 'delete', snapshot, '--bucket', 'Drafts')).toContain(
      `the server pruned its version ${first.id}`,
    );
    expect((await versionsListed(home, 'Drafts')).map((version) => version.id)).not.toContain(
      first.id,
    );
  });

  it('refuses a version not stored whole, one the bucket does not have, and a bucket with none', async () => {
    const { home, source } = await loggedIn('refused', 'Crash', 'interactive');
    expect(await canopyFails(home, 'snapshots', 'create', '--bucket', 'Crash')).toContain(
      'bucket "Crash" has no backup yet',
    );
    for (let part = 0; part < 3; part += 1)
      writeSettled(path.join(source, `part-${part}.bin`), randomBytes(1 << 20));
    // A backup killed once its version was pushed, before any data went.
    const crashed = await runHelper('crashing-backup', [home, source, 'shard:0']).exited;
    expect(crashed.signal).toBe('SIGKILL');
    const [pending] = await versionsListed(home, 'Crash');
    if (pending?.state !== 'pending') throw new Error('a pending version expected');
    expect(
      await canopyFails(home, 'snapshots', 'create', pending.id, '--bucket', 'Crash'),
    ).toContain(
      `version ${pending.id} is still being uploaded: run the backup again to finish it, then take its snapshot`,
    );
    // Its upload window over, its upload failed.
    service.advance(61_000);
    expect(
      await canopyFails(home, 'snapshots', 'create', pending.id, '--bucket', 'Crash'),
    ).toContain(`the upload of version ${pending.id} failed, so not all of its data is stored`);
    expect(
      await canopyFails(home, 'snapshots', 'create', 'no-such-version', '--bucket', 'Crash'),
    ).toContain('bucket "Crash" has no version no-such-version (canopy versions lists them)');
    expect(await canopy(home, 'snapshots', '--bucket', 'Crash')).toContain('no snapshots yet');
  });
});
