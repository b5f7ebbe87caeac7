import { afterAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync, truncateSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canopySucceeds, loginWithBucket } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';

// `canopy versions` tells what each version holds, its files and their bytes, as its manifest
// states them: known for each version this computer stored, and for another computer's once it
// read that version's list of files; told as not known otherwise, never guessed.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-version-totals-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface ListedVersion {
  readonly id: string;
  readonly file_count: number | null;
  readonly total_bytes: number | null;
}

async function listed(home: string): Promise<ListedVersion[]> {
  return JSON.parse(
    await canopySucceeds(home, 'versions', '--bucket', 'Docs', '--json'),
  ) as ListedVersion[];
}

describe('the versions listed', () => {
  it('tell the files and bytes each holds, where this computer knows them', async () => {
    const source = path.join(scratch, 'source');
    writeSettled(path.join(source, 'letter.txt'), 'dear Ann');
    writeSettled(path.join(source, 'photos', 'beach.jpg'), 'a beach');
    const home = path.join(scratch, 'home');
    const data = path.join(scratch, 'data');
    await loginWithBucket(home, data, 'Docs');
    await canopySucceeds(home, 'backup', source, '--bucket', 'Docs', '--skip-check');
    writeSettled(path.join(source, 'photos', 'hill.jpg'), 'a hill');
    await canopySucceeds(home, 'backup', source, '--bucket', 'Docs', '--skip-check');

    const [second, first] = await listed(home);
    expect(first).toMatchObject({ file_count: 2, total_bytes: 15 });
    expect(second).toMatchObject({ file_count: 3, total_bytes: 21 });
    const table = await canopySucceeds(home, 'versions', '--bucket', 'Docs');
    expect(table).toMatch(/^ID +STATE +CREATED +FILES +SIZE +NEW DATA +PINNED\n/);
    expect(table).toMatch(
      new RegExp(`^${second?.id ?? ''} +active +${TOLD_TIME} +3 +21 B +6 B +yes$`, 'm'),
    );
    expect(table).toMatch(
      new RegExp(`^${first?.id ?? ''} +outdated +${TOLD_TIME} +2 +15 B +15 B +yes$`, 'm'),
    );

    // A home from before these notes were kept knows them from the versions it keeps cached.
    const state = new Database(path.join(home, 'state.sqlite'));
    state.prepare('DELETE FROM version_totals').run();
    state.close();
    expect(await listed(home)).toMatchObject([
      { id: second?.id, file_count: 3, total_bytes: 21 },
      { id: first?.id, file_count: 2, total_bytes: 15 },
    ]);
    // One whose cached copy was damaged on the disk (cut short, without its index) is listed all
    // the same, as not known.
    const again = new Database(path.join(home, 'state.sqlite'));
    again.prepare('DELETE FROM version_totals WHERE version_id = ?').run(first?.id);
    again.close();
    const cached = path.join(home, 'metadata', `${first?.id ?? ''}.car`);
    truncateSync(cached, statSync(cached).size - 10);
    rmSync(`${cached}.nodes`, { force: true });
    expect(await listed(home)).toMatchObject([
      { id: second?.id, file_count: 3 },
      { id: first?.id, file_count: null, total_bytes: null },
    ]);

    // Another computer, backing up to the same disk: not known until it reads a version.
    const other = path.join(scratch, 'other-home');
    await canopySucceeds(other, 'login', '--local', '--data', data);
    expect(await listed(other)).toMatchObject([
      { id: second?.id, file_count: null, total_bytes: null },
      { id: first?.id, file_count: null, total_bytes: null },
    ]);
    const unknown = await canopySucceeds(other, 'versions', '--bucket', 'Docs');
    expect(unknown).toMatch(
      new RegExp(`^${first?.id ?? ''} +outdated +${TOLD_TIME} +- +- +15 B +yes$`, 'm'),
    );
    expect(unknown).toContain(
      '\n-: versions this computer has not read the list of files of yet (canopy ls --version ID reads it)\n',
    );
    await canopySucceeds(other, 'ls', '--bucket', 'Docs', '--version', first?.id ?? '');
    expect(await listed(other)).toMatchObject([
      { id: second?.id, file_count: null },
      { id: first?.id, file_count: 2, total_bytes: 15 },
    ]);
  });
});
