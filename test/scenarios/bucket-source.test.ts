import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canopySucceeds, loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// A bucket holds the versions of one source folder (§17.1). A backup of another folder into it
// is refused, naming the folder it holds and the flag that replaces it, and stores nothing;
// asked with --replace-source, the new folder becomes the bucket's source and the versions of
// the old one stay restorable. A folder renamed since its last backup is read no more than it
// would have been under its old name. Through the `canopy` command, as a user runs it.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-bucket-source-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };

interface VersionRow {
  readonly id: string;
  readonly state: string;
}

async function versionsOf(home: string, bucket: string): Promise<VersionRow[]> {
  const listed = await runCanopy(home, ['versions', '--bucket', bucket, '--json'], env);
  expect(listed.status, listed.stderr).toBe(0);
  return JSON.parse(listed.stdout) as VersionRow[];
}

async function namesIn(home: string, bucket: string): Promise<string[]> {
  const listed = await runCanopy(home, ['ls', '--bucket', bucket, '--json'], env);
  expect(listed.status, listed.stderr).toBe(0);
  return (JSON.parse(listed.stdout) as { name: string }[]).map((entry) => entry.name);
}

describe("a bucket's source folder", () => {
  it('refuses another folder, naming both and the flag; --replace-source takes it and keeps the old versions', async () => {
    const home = path.join(scratch, 'home');
    await loginWithBucket(home, path.join(scratch, 'data'), 'Docs');
    const documents = path.join(scratch, 'Documents');
    const pictures = path.join(scratch, 'Pictures');
    writeSettled(path.join(documents, 'letter.txt'), 'dear Ann');
    writeSettled(path.join(pictures, 'beach.jpg'), 'a photo');

    const first = await runCanopy(home, ['backup', documents, '--bucket', 'Docs'], env);
    expect(first.status, first.stderr).toBe(0);
    const [documentsVersion] = await versionsOf(home, 'Docs');
    if (!documentsVersion) throw new Error('the first backup made no version');

    const host = os.hostname();
    const refusal = `this bucket holds backups of ${host}:${documents}, not of ${host}:${pictures}: choose another bucket, or add --replace-source to make this folder its source from now on (the versions of ${host}:${documents} stay restorable)`;
    // A dry run tells so first, as the backup would, and exits as it would.
    const refusedDry = await runCanopy(
      home,
      ['backup', pictures, '--bucket', 'Docs', '--dry-run', '--json'],
      env,
    );
    expect(refusedDry.status).toBe(1);
    expect(JSON.parse(refusedDry.stdout)).toMatchObject({
      files: 1,
      toRead: null,
      refusedBecause: refusal,
      bucketKnown: true,
    });
    expect(refusedDry.stderr).toBe(`canopy: the backup would be refused: ${refusal}\n`);
    const replacingDry = await runCanopy(
      home,
      ['backup', pictures, '--bucket', 'Docs', '--dry-run', '--replace-source'],
      env,
    );
    expect(replacingDry.status, replacingDry.stderr).toBe(0);
    expect(replacingDry.stdout).toBe(
      'would back up 1 file, 7 B\nof which it would read 1 file (7 B), those not backed up here before or changed since; the others are unchanged, and not read again\n',
    );

    // A bucket's name mistyped: the dry run says this computer knows none of that name.
    const mistyped = await runCanopy(
      home,
      ['backup', pictures, '--bucket', 'Dcos', '--dry-run'],
      env,
    );
    expect(mistyped.status, mistyped.stderr).toBe(0);
    expect(mistyped.stdout).toBe(
      'this computer knows no bucket named "Dcos", as it last listed them (canopy buckets lists them)\nwould back up 1 file, 7 B\n',
    );

    const refused = await runCanopy(home, ['backup', pictures, '--bucket', 'Docs'], env);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(`canopy: ${refusal}\n`);
    expect(await versionsOf(home, 'Docs')).toEqual([documentsVersion]);
    expect(await namesIn(home, 'Docs')).toEqual(['letter.txt']);

    const replaced = await runCanopy(
      home,
      ['backup', pictures, '--bucket', 'Docs', '--replace-source'],
      env,
    );
    expect(replaced.status, replaced.stderr).toBe(0);
    expect(await namesIn(home, 'Docs')).toEqual(['beach.jpg']);
    const versions = await versionsOf(home, 'Docs');
    expect(versions.map((version) => version.id)).toContain(documentsVersion.id);
    expect(versions.filter((version) => version.state === 'active')).toHaveLength(1);

    // The folder it held before is now the other source, refused as the new one was.
    const back = await runCanopy(home, ['backup', documents, '--bucket', 'Docs'], env);
    expect(back.status).toBe(1);
    expect(back.stderr).toContain(
      `holds backups of ${host}:${pictures}, not of ${host}:${documents}`,
    );

    const target = path.join(scratch, 'restored');
    const restored = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--version', documentsVersion.id, '--to', target],
      env,
    );
    expect(restored.status, restored.stderr).toBe(0);
    expect(restored.stdout).toContain('restored 1 file (8 B), 1 folder, 0 symlinks\n');
    expect(readFileSync(path.join(target, 'letter.txt'), 'utf8')).toBe('dear Ann');

    // Restored again over an edited copy: the edit is kept, and the line says where each went.
    writeFileSync(path.join(target, 'letter.txt'), 'dear Ann, edited');
    const beside = await runCanopy(
      home,
      ['restore', '--bucket', 'Docs', '--version', documentsVersion.id, '--to', target],
      env,
    );
    expect(beside.status, beside.stderr).toBe(0);
    expect(beside.stdout).toContain(
      'kept letter.txt, which was there already (a file, folder or link); restored as letter (restored).txt\n',
    );
    expect(readFileSync(path.join(target, 'letter.txt'), 'utf8')).toBe('dear Ann, edited');
    expect(readFileSync(path.join(target, 'letter (restored).txt'), 'utf8')).toBe('dear Ann');
  });

  it('reads none of a folder renamed since its last backup, once it is the source (--replace-source)', async () => {
    const home = path.join(scratch, 'renaming-home');
    await loginWithBucket(home, path.join(scratch, 'renaming-data'), 'Music');
    const before = path.join(scratch, 'Music');
    writeSettled(path.join(before, 'album', 'one.flac'), randomBytes(1_500_000));
    writeSettled(path.join(before, 'album', 'two.flac'), randomBytes(700_000));
    writeSettled(path.join(before, 'playlist.m3u'), 'album/one.flac\nalbum/two.flac\n');
    writeSettled(path.join(before, 'stems', 'drums.wav'), randomBytes(300_000));
    await canopySucceeds(home, 'excludes', before, '--add', 'stems/');
    const backup = async (dir: string, ...more: string[]) => {
      const run = await runCanopy(
        home,
        ['backup', dir, '--bucket', 'Music', '--json', '--skip-check', ...more],
        env,
      );
      expect(run.status, run.stderr).toBe(0);
      return JSON.parse(run.stdout) as { files: number; bytesRead: number; unchanged: boolean };
    };
    expect(await backup(before)).toMatchObject({ files: 3, bytesRead: 2_200_030 });

    const after = path.join(scratch, 'Music (2026)');
    renameSync(before, after);
    // A file changed after the rename is read, and only it; the rules kept for the folder
    // under its old name still keep its stems out, and stay with it under the new one.
    writeSettled(path.join(after, 'playlist.m3u'), 'album/two.flac\nalbum/one.flac\n');
    // A dry run tells the same, and keeps nothing.
    const dryRun = await canopySucceeds(
      home,
      ...['backup', after, '--bucket', 'Music', '--replace-source', '--dry-run'],
    );
    expect(dryRun).toBe(
      [
        `would apply the exclude rules kept for ${before}, this bucket's folder before, and keep them for this folder`,
        'would back up 3 files, 2.2 MB',
        'of which it would read 1 file (30 B), those not backed up here before or changed since; the others are unchanged, and not read again',
        'would leave out 1 item, holding 1 file, 300 kB (canopy excludes DIR shows the rules):',
        'excluded by rules: stems/ (1 file, 300 kB), by "stems/" kept for this folder',
        '',
      ].join('\n'),
    );
    const keptFor = async (dir: string): Promise<unknown> =>
      JSON.parse(await canopySucceeds(home, 'excludes', dir, '--json'));
    expect(await keptFor(after)).toMatchObject({ kept: [] });
    const renamed = await canopySucceeds(
      home,
      ...['backup', after, '--bucket', 'Music', '--skip-check', '--replace-source'],
    );
    expect(renamed).toContain('3 files (2 unchanged, not read again), 2.2 MB scanned, 30 B read,');
    expect(renamed).toContain(
      `applied the exclude rules kept for ${before}, this bucket's folder before, and keeps them for this folder from now on (canopy excludes DIR shows them)\n`,
    );
    expect(await namesIn(home, 'Music')).toEqual(['album', 'playlist.m3u']);
    expect(await keptFor(after)).toMatchObject({ dir: after, kept: ['stems/'] });
    // Kept for the new name, they apply once it is the source: nothing changed, nothing made.
    expect(await backup(after)).toMatchObject({ files: 3, bytesRead: 0, unchanged: true });

    const target = path.join(scratch, 'music-restored');
    const restored = await runCanopy(home, ['restore', '--bucket', 'Music', '--to', target], env);
    expect(restored.status, restored.stderr).toBe(0);
    for (const file of ['album/one.flac', 'album/two.flac', 'playlist.m3u'])
      expect(readFileSync(path.join(target, file))).toEqual(readFileSync(path.join(after, file)));
  });
  it('sends none of the data another bucket of the user holds, says how much that was, and restores whole from it', async () => {
    const home = path.join(scratch, 'copies-home');
    await loginWithBucket(home, path.join(scratch, 'copies-data'), 'Laptop');
    await canopySucceeds(
      home,
      'buckets',
      'create',
      'Offsite',
      '--type',
      'backup',
      '--class',
      'hot',
    );
    const photos = path.join(scratch, 'Photos');
    const beach = randomBytes(2_500_000);
    writeSettled(path.join(photos, 'beach.jpg'), beach);
    writeSettled(path.join(photos, 'album.txt'), 'beach.jpg: us, in June');
    await canopySucceeds(home, 'backup', photos, '--bucket', 'Laptop', '--skip-check');

    const copied = await canopySucceeds(
      home,
      ...['backup', photos, '--bucket', 'Offsite', '--skip-check'],
    );
    expect(copied).toContain(
      '2.5 MB new (2.5 MB of it on the server already, in another bucket or version), 0 B uploaded',
    );
    const target = path.join(scratch, 'photos-restored');
    const restored = await runCanopy(home, ['restore', '--bucket', 'Offsite', '--to', target], env);
    expect(restored.status, restored.stderr).toBe(0);
    expect(readFileSync(path.join(target, 'beach.jpg'))).toEqual(beach);
    expect(readFileSync(path.join(target, 'album.txt'), 'utf8')).toBe('beach.jpg: us, in June');
  });
});
