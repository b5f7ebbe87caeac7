import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { nobodyEngine } from '../helpers/nobody-engine.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// `canopy restore --dry-run`: what a restore would write, what the target holds already, what
// is in the way there (kept, with the version's beside it, or replaced with --overwrite), and
// whether it would be refused; nothing written. What it tells is what the restore then does.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restore-plan-'));
const mounts: string[] = [];
afterAll(() => {
  for (const mount of mounts) spawnSync('umount', [mount]);
  rmSync(scratch, { recursive: true, force: true });
});
const env = { CANOPY_SECRET_STORE: 'file' };
const NOBODY = 65534;

/** Every path below `dir` with its size (folders and links: -1), to see nothing changed. */
function treeOf(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .map((entry) => {
      const full = path.join(entry.parentPath, entry.name);
      return `${path.relative(dir, full)} ${entry.isFile() ? statSync(full).size : -1}`;
    })
    .sort();
}

async function engineWithBackup(
  name: string,
): Promise<{ engine: Engine; home: string; source: string }> {
  const source = path.join(scratch, name, 'source');
  writeSettled(path.join(source, 'docs', 'letter.txt'), 'dear Ann');
  writeSettled(path.join(source, 'docs', 'list.txt'), 'milk, eggs');
  writeSettled(path.join(source, 'photos', 'beach.jpg'), 'a beach');
  writeSettled(path.join(source, 'photos', 'hill.jpg'), 'a hill');
  symlinkSync('docs/letter.txt', path.join(source, 'latest'));
  const home = path.join(scratch, name, 'home');
  const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
  await engine.loginLocal({ dataDir: path.join(scratch, name, 'data') });
  await engine.createBucket({ name: 'Home', type: 'backup', storageClass: 'hot' });
  await engine.backup({ dir: source, bucket: 'Home' });
  return { engine, home, source };
}

describe('a restore dry run', () => {
  it('tells what the restore into a changed folder would write, leave and keep, writes nothing, and the restore does that', async () => {
    const { engine, home, source } = await engineWithBackup('changed');
    try {
      // Since the backup: one letter edited, the photos folder replaced by a file of its name,
      // a file of the user's own added.
      writeFileSync(path.join(source, 'docs', 'letter.txt'), 'dear Ann, edited');
      rmSync(path.join(source, 'photos'), { recursive: true });
      writeFileSync(path.join(source, 'photos'), 'a note where the photos were');
      writeFileSync(path.join(source, 'mine.txt'), 'not in the version');
      const before = treeOf(source);

      const plan = await engine.planRestore({ bucket: 'Home', overwrite: false });
      expect(plan).toMatchObject({
        restoredInto: source,
        backedUpFrom: null,
        // The edited letter beside itself; the photos folder beside the file, with both photos.
        files: 3,
        bytes: 'dear Ann'.length + 'a beach'.length + 'a hill'.length,
        directories: 1,
        symlinks: 0,
        alreadyThere: 2,
        beside: ['docs/letter.txt', 'photos'],
        replaced: [],
        refusedBecause: null,
      });
      expect(treeOf(source)).toEqual(before);

      const cli = await runCanopy(home, ['restore', '--bucket', 'Home', '--dry-run'], env);
      expect(cli.status, cli.stderr).toBe(0);
      expect(cli.stdout).toBe(
        [
          `would restore version ${plan.versionId} into ${source}, where it was backed up from`,
          'would write 3 files (21 B), 1 folder, 0 symlinks',
          'already there with the same content, and would be left as they are: 2 files and links',
          'would keep 2 items there (a file, folder or link of a name it restores), and restore the version\'s beside each with " (restored)" added to the name, before its extension (--overwrite replaces files and links):',
          '  docs/letter.txt',
          '  photos',
          '',
        ].join('\n'),
      );
      expect(treeOf(source)).toEqual(before);

      // The restore does what the dry run told.
      const restored = await engine.restore({ bucket: 'Home', overwrite: false });
      expect(restored).toMatchObject({
        files: plan.files,
        bytes: plan.bytes,
        directories: plan.directories,
        symlinks: plan.symlinks,
        alreadyThere: plan.alreadyThere,
        renamed: ['docs/letter (restored).txt', 'photos (restored)'],
      });
    } finally {
      await engine.close();
    }
  });

  it('with --overwrite tells what it would replace, never a folder by a file, and the restore does that', async () => {
    const { engine, home, source } = await engineWithBackup('overwrite');
    try {
      writeFileSync(path.join(source, 'docs', 'letter.txt'), 'dear Ann, edited');
      rmSync(path.join(source, 'photos'), { recursive: true });
      writeFileSync(path.join(source, 'photos'), 'a note where the photos were');
      // A folder where the version has a link: kept, the link goes beside it.
      rmSync(path.join(source, 'latest'));
      mkdirSync(path.join(source, 'latest'));
      const plan = await engine.planRestore({ bucket: 'Home', overwrite: true });
      expect(plan).toMatchObject({
        // With --overwrite nothing is left as it was: every file is written.
        files: 4,
        directories: 1,
        symlinks: 1,
        alreadyThere: 0,
        replaced: ['docs/letter.txt', 'docs/list.txt', 'photos'],
        beside: ['latest'],
      });
      const cli = await runCanopy(
        home,
        ['restore', '--bucket', 'Home', '--overwrite', '--dry-run'],
        env,
      );
      expect(cli.status, cli.stderr).toBe(0);
      expect(cli.stdout.split('\n').slice(-3)).toEqual([
        'would keep 1 item there (a file, folder or link of a name it restores that it may not replace: a folder, or another user\'s in a shared folder), and restore the version\'s beside it with " (restored)" added to the name, before its extension:',
        '  latest',
        '',
      ]);
      const restored = await engine.restore({ bucket: 'Home', overwrite: true });
      expect(restored).toMatchObject({
        files: plan.files,
        symlinks: plan.symlinks,
        renamed: ['latest (restored)'],
      });
      expect(statSync(path.join(source, 'photos')).isDirectory()).toBe(true);
    } finally {
      await engine.close();
    }
  });

  it('into a folder not there tells all it would write and makes no folder; into a disk too small it says the restore would be refused', async () => {
    const { engine, home } = await engineWithBackup('new-place');
    try {
      const fresh = path.join(scratch, 'new-place', 'fresh', 'copy');
      const plan = await engine.planRestore({ bucket: 'Home', to: fresh, overwrite: false });
      expect(plan).toMatchObject({
        files: 4,
        directories: 3,
        symlinks: 1,
        alreadyThere: 0,
        beside: [],
        refusedBecause: null,
      });
      expect(() => statSync(path.join(scratch, 'new-place', 'fresh'))).toThrow(/ENOENT/);

      // A disk of 8 inodes: the version's 8 files, folders and links do not fit beside its top.
      const small = path.join(scratch, 'new-place', 'small');
      mkdirSync(small);
      const mounted = spawnSync('mount', [
        '-t',
        'tmpfs',
        '-o',
        'size=1m,nr_inodes=8',
        'tmpfs',
        small,
      ]);
      expect(mounted.status).toBe(0);
      mounts.push(small);
      const refused = await runCanopy(
        home,
        ['restore', '--bucket', 'Home', '--dry-run', '--to', path.join(small, 'copy')],
        env,
      );
      expect(refused.status).toBe(1);
      expect(refused.stdout).toContain('would write 4 files (31 B), 3 folders, 1 symlink\n');
      expect(refused.stderr).toBe(
        `canopy: the restore would be refused: not enough free space in ${path.join(small, 'copy')} to restore: its 8 files, folders and links need an entry each (an inode), and the disk can make 7 more; nothing was restored. Free some space, restore to another disk, or restore a part of it (canopy restore PATH)\n`,
      );
      expect(readdirSync(small)).toEqual([]);

      // A path the version does not hold: told as the restore tells it.
      const missing = await runCanopy(
        home,
        ['restore', '--bucket', 'Home', 'docs/recipes.txt', '--dry-run', '--to', fresh],
        env,
      );
      expect(missing.status).toBe(1);
      expect(missing.stderr).toBe(
        'canopy: no docs/recipes.txt in this version (canopy ls "docs" shows what is there, canopy history the versions that hold it)\n',
      );

      // One folder of it, into a file: refused as the restore would be.
      const file = path.join(scratch, 'new-place', 'a-file');
      writeFileSync(file, 'not a folder');
      const intoFile = await runCanopy(
        home,
        ['restore', '--bucket', 'Home', 'docs', '--dry-run', '--to', file],
        env,
      );
      expect(intoFile.status).toBe(1);
      expect(intoFile.stderr).toBe(
        `canopy: the restore would be refused: ${file} is not a folder; a restore writes into a folder\n`,
      );
      // Below a file, where no folder can be made: refused in the restore's words.
      const underFile = path.join(file, 'copy');
      const planUnder = await runCanopy(
        home,
        ['restore', '--bucket', 'Home', 'docs', '--dry-run', '--to', underFile],
        env,
      );
      expect(planUnder.status).toBe(1);
      const why = `no folder can be made at ${underFile}: ${file} is a file`;
      expect(planUnder.stderr).toBe(`canopy: the restore would be refused: ${why}\n`);
      const restoreUnder = await runCanopy(
        home,
        ['restore', '--bucket', 'Home', 'docs', '--to', underFile],
        env,
      );
      expect(restoreUnder.status).toBe(2);
      expect(restoreUnder.stderr).toBe(`canopy: ${why}\n`);
    } finally {
      await engine.close();
    }
  });

  it('into a symbolic link to a folder tells what the restore into that folder does, and names the copies a restore before left', async () => {
    const { engine, home } = await engineWithBackup('linked');
    try {
      const folder = path.join(scratch, 'linked', 'elsewhere');
      mkdirSync(path.join(folder, 'docs'), { recursive: true });
      writeFileSync(path.join(folder, 'docs', 'letter.txt'), 'dear Ann, edited');
      const link = path.join(scratch, 'linked', 'link');
      symlinkSync(folder, link);
      const plan = await engine.planRestore({ bucket: 'Home', to: link, overwrite: false });
      expect(plan).toMatchObject({
        files: 4,
        directories: 1,
        beside: ['docs/letter.txt'],
        refusedBecause: null,
      });
      const first = await engine.restore({ bucket: 'Home', to: link, overwrite: false });
      expect(first).toMatchObject({
        files: plan.files,
        directories: plan.directories,
        renamed: ['docs/letter (restored).txt'],
      });

      const restoreInto = (...more: string[]): ReturnType<typeof runCanopy> =>
        runCanopy(home, ['restore', '--bucket', 'Home', '--to', link, ...more], env);
      const again = await restoreInto('--dry-run');
      expect(again.status, again.stderr).toBe(0);
      expect(again.stdout).toBe(
        [
          `would restore version ${plan.versionId} into ${link}`,
          'would write 0 files (0 B), 0 folders, 0 symlinks',
          'already there with the same content, and would be left as they are: 4 files and links',
          'docs/letter.txt was restored before as docs/letter (restored).txt, with the same content, and would be left as it is',
          '',
        ].join('\n'),
      );
      const restored = await restoreInto();
      expect(restored.status, restored.stderr).toBe(0);
      expect(restored.stdout).toBe(
        [
          'restored 0 files (0 B), 0 folders, 0 symlinks',
          'already there with the same content, and left as they were: 4 files and links',
          'docs/letter.txt was restored before as docs/letter (restored).txt, with the same content, and left as it was',
          '',
        ].join('\n'),
      );
      expect(readdirSync(path.join(folder, 'docs')).sort()).toEqual([
        'letter (restored).txt',
        'letter.txt',
        'list.txt',
      ]);

      // A link to nothing: refused by both, in the same words.
      const dangling = path.join(scratch, 'linked', 'dangling');
      symlinkSync(path.join(scratch, 'linked', 'nowhere'), dangling);
      const why = `no folder can be made at ${dangling}: it is a symbolic link to ${path.join(scratch, 'linked', 'nowhere')}, which is not there`;
      const planned = await runCanopy(
        home,
        ['restore', '--bucket', 'Home', '--to', dangling, '--dry-run'],
        env,
      );
      expect(planned.status).toBe(1);
      expect(planned.stderr).toBe(`canopy: the restore would be refused: ${why}\n`);
      const refused = await runCanopy(home, ['restore', '--bucket', 'Home', '--to', dangling], env);
      expect(refused.status).toBe(2);
      expect(refused.stderr).toBe(`canopy: ${why}\n`);
    } finally {
      await engine.close();
    }
  });

  it('says a restore would be refused where this user may not write, and names a folder it may not look into', () => {
    const source = path.join(scratch, 'nobody', 'source');
    writeSettled(path.join(source, 'docs', 'letter.txt'), 'dear Ann');
    chownSync(path.join(scratch, 'nobody'), NOBODY, NOBODY);
    for (const dir of [source, path.join(source, 'docs')]) chownSync(dir, NOBODY, NOBODY);
    chownSync(path.join(source, 'docs', 'letter.txt'), NOBODY, NOBODY);
    chmodSync(scratch, 0o755);
    const asNobody = nobodyEngine(path.join(scratch, 'nobody', 'home'));
    expect(asNobody(['login', 'Docs']).status).toBe(0);
    const backup = asNobody(['backup', source, 'Docs']);
    expect(backup.status, backup.stderr).toBe(0);

    // Root's folder, which nobody may read but not write.
    const roots = path.join(scratch, 'roots');
    mkdirSync(roots, { mode: 0o755 });
    const notWritable = asNobody(['plan-restore', 'Docs', path.join(roots, 'copy')]);
    expect(notWritable.status, notWritable.stderr).toBe(0);
    expect(JSON.parse(notWritable.stdout)).toMatchObject({
      files: 1,
      refusedBecause: `cannot write in ${roots}: permission denied`,
    });

    // Nobody's own folder, holding a folder of the version's name that is root's alone.
    const target = path.join(scratch, 'nobody', 'target');
    mkdirSync(path.join(target, 'docs'), { recursive: true, mode: 0o700 });
    chownSync(target, NOBODY, NOBODY);
    const closed = asNobody(['plan-restore', 'Docs', target]);
    expect(closed.status).toBe(1);
    expect(closed.stderr).toBe(
      `permission_denied: cannot look in ${path.join(target, 'docs')}: permission denied\n`,
    );
  });
});
