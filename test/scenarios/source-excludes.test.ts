import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { CACHE_TAG_NAME, CACHE_TAG_SIGNATURE } from '../../main/scanner/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// Exclude rules a user keeps in Canopy for a source folder, besides its .canopyignore: kept
// across runs, applied between the defaults and the file, shown by a dry run, and taken back
// by the next backup once removed. From the engine and from the `canopy excludes` command.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-source-excludes-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function makeSource(name: string): string {
  const source = path.join(scratch, name);
  writeSettled(path.join(source, 'photos', 'beach.jpg'), 'a photo');
  writeSettled(path.join(source, 'disk.iso'), 'a disk image');
  writeSettled(path.join(source, 'keep.iso'), 'an image to keep');
  writeSettled(path.join(source, 'build', 'out.o'), 'built');
  writeSettled(path.join(source, '.canopyignore'), '# mine\n!keep.iso\n');
  return source;
}

function engineAt(home: string): Engine {
  return createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
}

describe('exclude rules kept for a source', () => {
  it('are kept across runs, skipped by backups, and taken back once removed', async () => {
    const home = path.join(scratch, 'home');
    const source = makeSource('source');
    let engine = engineAt(home);
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Work', type: 'backup', storageClass: 'hot' });
      const set = await engine.setExcludeRules({ dir: source, rules: ['*.iso', 'build/'] });
      expect(set).toMatchObject({
        dir: source,
        kept: ['*.iso', 'build/'],
        ignoreFile: path.join(source, '.canopyignore'),
        fileRules: ['!keep.iso'],
      });
      expect(set.defaults).toContain('Thumbs.db');
      const plan = await engine.planBackup({ dir: source });
      // What each holds, and the rule that leaves it out, so the user knows what to change.
      expect(plan.excluded).toEqual([
        {
          path: 'build',
          type: 'directory',
          files: 1,
          bytes: 'built'.length,
          unreadable: 0,
          by: { from: 'kept', rule: 'build/' },
        },
        {
          path: 'disk.iso',
          type: 'file',
          files: 1,
          bytes: 'a disk image'.length,
          unreadable: 0,
          by: { from: 'kept', rule: '*.iso' },
        },
      ]);
      // Without a backup of it here, nothing tells what a backup would read, nor without a bucket.
      expect((await engine.planBackup({ dir: source, bucket: 'Work' })).toRead).toBeNull();
      const first = await engine.backup({ dir: source, bucket: 'Work' });
      expect(first.files).toBe(3);
      expect(await engine.planBackup({ dir: source, bucket: 'Work' })).toMatchObject({
        files: 3,
        toRead: { files: 0, bytes: 0 },
      });
      expect((await engine.planBackup({ dir: source })).toRead).toBeNull();
      expect((await engine.ls({ bucket: 'Work' })).map((entry) => entry.name)).toEqual([
        '.canopyignore',
        'keep.iso',
        'photos',
      ]);

      // A rule that is not one line is refused, and what was kept stays.
      await expect(
        engine.setExcludeRules({ dir: source, rules: ['*.iso', 'two\nlines'] }),
      ).rejects.toMatchObject({
        code: 'usage',
        message: 'cannot keep the exclude rule "two\\nlines": a rule is one line',
      });
      await engine.close();
      engine = engineAt(home);
      expect((await engine.excludeRules({ dir: source })).kept).toEqual(['*.iso', 'build/']);

      // Removed, the rules no longer hold: the next backup reads what they kept out, and only
      // that.
      await engine.setExcludeRules({ dir: source, rules: [] });
      // A dry run tells what the backup then reads: what the rules kept out, and only that.
      expect(await engine.planBackup({ dir: source, bucket: 'Work' })).toMatchObject({
        files: 5,
        toRead: { files: 2, bytes: 'a disk image'.length + 'built'.length },
      });
      const second = await engine.backup({ dir: source, bucket: 'Work' });
      expect(second).toMatchObject({
        files: 5,
        filesUnchanged: 3,
        bytesRead: 'a disk image'.length + 'built'.length,
      });
      expect((await engine.ls({ bucket: 'Work', path: 'build' })).map((e) => e.name)).toEqual([
        'out.o',
      ]);
      expect((await engine.excludeRules({ dir: source })).kept).toEqual([]);
    } finally {
      await engine.close();
    }
  });

  it('are shown and changed with `canopy excludes`, which a dry run follows', async () => {
    const home = path.join(scratch, 'cli-home');
    const source = makeSource('cli-source');
    // No keychain is needed: nothing here is logged in.
    const canopy = (args: readonly string[]) =>
      runCanopy(home, args, { CANOPY_SECRET_STORE: 'file' });
    const added = await canopy([
      'excludes',
      source,
      '--add',
      '*.iso',
      '--add',
      'build/',
      '--add',
      '*.iso',
    ]);
    expect(added.status, added.stderr).toBe(0);
    expect(added.stdout).toContain(
      'kept by Canopy for this folder (canopy excludes DIR --add RULE | --remove RULE | --clear):\n  *.iso\n  build/\n',
    );
    expect(added.stdout).toContain(`${path.join(source, '.canopyignore')}:\n  !keep.iso\n`);

    const dryRun = await canopy(['backup', source, '--bucket', 'Any', '--dry-run']);
    expect(dryRun.status, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toContain(
      [
        'would back up 3 files, 40 B',
        'would leave out 2 items, holding 2 files, 17 B (canopy excludes DIR shows the rules):',
        'excluded by rules: build/ (1 file, 5 B), by "build/" kept for this folder',
        'excluded by rules: disk.iso (12 B), by "*.iso" kept for this folder',
      ].join('\n'),
    );

    const notKept = await canopy(['excludes', source, '--remove', '*.jpg']);
    expect(notKept.status).toBe(2);
    expect(notKept.stderr).toBe(`canopy: not a rule kept for ${source}: "*.jpg"\n`);

    const removed = await canopy(['excludes', source, '--remove', '*.iso', '--json']);
    expect(removed.status, removed.stderr).toBe(0);
    expect(JSON.parse(removed.stdout)).toMatchObject({ kept: ['build/'] });
    const cleared = await canopy(['excludes', source, '--clear', '--json']);
    expect(JSON.parse(cleared.stdout)).toMatchObject({ kept: [] });
  });

  it('leave out folders tagged as caches (CACHEDIR.TAG), named by a dry run, unless a rule includes one again', async () => {
    const home = path.join(scratch, 'caches-home');
    const source = path.join(scratch, 'caches');
    const tag = `${CACHE_TAG_SIGNATURE}\n# This file is a cache directory tag created by cargo.\n`;
    writeSettled(path.join(source, 'project', 'main.rs'), 'fn main() {}');
    writeSettled(path.join(source, 'project', 'target', CACHE_TAG_NAME), tag);
    writeSettled(path.join(source, 'project', 'target', 'debug', 'app'), 'x'.repeat(3000));
    writeSettled(path.join(source, 'notes', 'todo.txt'), 'back up the caches? no');
    writeSettled(path.join(source, 'notes', 'thumbnails', 'one.png'), 'y'.repeat(800));
    const canopy = async (...args: string[]) => {
      const run = await runCanopy(home, args, { CANOPY_SECRET_STORE: 'file' });
      expect(run.status, run.stderr).toBe(0);
      return run.stdout;
    };
    const names = async () =>
      (await canopy('ls', '--bucket', 'Caches', '-R'))
        .trimEnd()
        .split('\n')
        .map((line) => line.split('  ').at(-1));
    await canopy('login', '--local');
    await canopy('buckets', 'create', 'Caches', '--type', 'backup', '--class', 'hot');
    expect(await canopy('backup', source, '--bucket', 'Caches', '--dry-run')).toContain(
      [
        'would leave out 1 item, holding 2 files, 3.1 kB (canopy excludes DIR shows the rules):',
        `excluded by rules: project/target/ (2 files, 3.1 kB), a cache: its ${CACHE_TAG_NAME} says the program that made it makes it again (the rule "!/project/target/" keeps it)`,
      ].join('\n'),
    );
    expect(await canopy('backup', source, '--bucket', 'Caches')).toMatch(/^3 files \(0 unchanged/m);
    expect(await names()).toEqual([
      'notes',
      'notes/thumbnails',
      'notes/thumbnails/one.png',
      'notes/todo.txt',
      'project',
      'project/main.rs',
    ]);
    // A folder backed up before, tagged since: the next version leaves it out, and reads
    // none of the files it keeps.
    writeSettled(path.join(source, 'notes', 'thumbnails', CACHE_TAG_NAME), tag);
    expect(await canopy('backup', source, '--bucket', 'Caches')).toMatch(/^2 files \(2 unchanged/m);
    expect(await names()).not.toContain('notes/thumbnails');
    // Included again by name, a cache is backed up like any folder.
    await canopy('excludes', source, '--add', '!/project/target/');
    expect(await canopy('backup', source, '--bucket', 'Caches')).toMatch(/^4 files \(2 unchanged/m);
    expect(await names()).toContain('project/target/debug/app');
    expect(await names()).not.toContain('notes/thumbnails');
  });

  it("are measured by a dry run: what an excluded folder holds, what in it could not be read, and Canopy's own folder", async () => {
    const source = path.join(scratch, 'measured');
    writeSettled(path.join(source, 'notes.txt'), 'mine');
    writeSettled(path.join(source, '.cache', 'thumbs', 'one.png'), 'x'.repeat(1500));
    writeSettled(path.join(source, '.cache', 'two.png'), 'y'.repeat(500));
    // A name that is not UTF-8 (Latin-1 é): looked at, it is an item the walk cannot read.
    writeFileSync(
      Buffer.concat([Buffer.from(`${source}/.cache/caf`), Buffer.from([0xe9])]),
      'not counted',
    );
    // Canopy's home inside the folder: never backed up, whatever the rules say.
    const home = path.join(source, 'canopy-home');
    const dryRun = await runCanopy(home, ['backup', source, '--bucket', 'Any', '--dry-run'], {
      CANOPY_SECRET_STORE: 'file',
    });
    expect(dryRun.status, dryRun.stderr).toBe(0);
    const lines = dryRun.stdout.split('\n');
    // Not logged in, this computer knows no bucket at all.
    expect(lines[0]).toBe(
      'this computer knows no bucket named "Any", as it last listed them (canopy buckets lists them)',
    );
    expect(lines[1]).toBe('would back up 1 file, 4 B');
    expect(lines[3]).toBe(
      'excluded by rules: .cache/ (2 files, 2.0 kB, and 1 item it could not look into), by ".cache/" in Canopy\'s defaults',
    );
    expect(lines[4]).toMatch(
      /^excluded by rules: canopy-home\/ \(\d+ files?, .+\), Canopy's own folder, never backed up$/,
    );
    expect(lines[2]).toMatch(/^would leave out 2 items, holding \d+ files, .+ \(canopy excludes/);
  });
});
