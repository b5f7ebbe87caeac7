import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MetadataNodes, packSource } from '../../../main/packer/index.ts';
import { loadExcludeRules } from '../../../main/scanner/index.ts';
import { openStateDatabase, sourceFileIndex } from '../../../main/state/index.ts';
import { surveySource } from '../../../main/uploader/unchanged-source.ts';
import { writeSettled } from '../../helpers/settled-file.ts';

// The survey walk against the file index: which folders hold a change, however it shows.

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function scratchDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-survey-'));
  dirs.push(dir);
  return dir;
}

/** A folder's mtime, in whole seconds: set again after a change, it is the same to the ns. */
const FOLDER_TIME = new Date('2020-01-02T03:04:05Z');

/** Runs `change`, then gives `folder` back its mtime: a change its mtime does not show. */
function keepingMtime(folder: string, change: () => void): void {
  change();
  utimesSync(folder, FOLDER_TIME, FOLDER_TIME);
}

describe('surveySource', () => {
  it('notes each folder holding a change, and every folder above it, and no other', async () => {
    const source = scratchDir();
    for (const folder of ['a/x', 'a/y', 'b/z', 'c', 'd/w'])
      writeSettled(path.join(source, folder, 'f.txt'), folder);
    for (const folder of ['b/z', 'c'])
      utimesSync(path.join(source, folder), FOLDER_TIME, FOLDER_TIME);
    const db = openStateDatabase(path.join(scratchDir(), 'state.sqlite'));
    try {
      const stage = sourceFileIndex(db, 'bucket', source).stage();
      await packSource({
        sourceDir: source,
        sourceLabel: 'test:/src',
        deviceFingerprint: 'a'.repeat(40),
        createdAtSeconds: 1_800_000_000,
        nodes: new MetadataNodes(),
        onLeaf: () => Promise.resolve(),
        onSkip: () => undefined,
        onEntry: (entry) => stage.add(entry),
      });
      stage.commit('version-1', { paths: [], filesModifiedFromNs: 2n ** 62n });
      const rules = await loadExcludeRules(source);
      const unchanged = await surveySource(source, rules, sourceFileIndex(db, 'bucket', source));
      expect(unchanged).toMatchObject({ unchanged: true, files: 5 });
      expect([...(unchanged.changedFolders ?? ['none'])]).toEqual([]);

      // A file of a new size; a file gone, and a named pipe come (skipped, never stored), each
      // in a folder whose mtime is put back; a file rewritten at its size, its mtime put back
      // (as npm, tar and cp -p do), which only its ctime shows; nothing in a/x.
      const rewritten = path.join(source, 'd', 'w', 'f.txt');
      const before = lstatSync(rewritten);
      writeFileSync(rewritten, 'D/W');
      utimesSync(rewritten, before.atime, before.mtime);
      expect(lstatSync(rewritten).mtimeMs).toBe(before.mtimeMs);
      writeSettled(path.join(source, 'a', 'y', 'f.txt'), 'longer than before');
      keepingMtime(path.join(source, 'b', 'z'), () => rmSync(path.join(source, 'b', 'z', 'f.txt')));
      keepingMtime(path.join(source, 'c'), () =>
        execFileSync('mkfifo', [path.join(source, 'c', 'pipe')]),
      );
      const survey = await surveySource(source, rules, sourceFileIndex(db, 'bucket', source));
      expect(survey.unchanged).toBe(false);
      expect([...(survey.changedFolders ?? [])].sort()).toEqual([
        '',
        'a',
        'a/y',
        'b',
        'b/z',
        'c',
        'c/pipe',
        'd',
        'd/w',
      ]);
      expect(survey).toMatchObject({
        files: 4,
        bytesToRead: 'longer than before'.length + 'D/W'.length,
      });
    } finally {
      db.close();
    }
  });

  it('notes no folder when the index describes no version', async () => {
    const source = scratchDir();
    writeSettled(path.join(source, 'a', 'f.txt'), 'a');
    const db = openStateDatabase(path.join(scratchDir(), 'state.sqlite'));
    try {
      const rules = await loadExcludeRules(source);
      const survey = await surveySource(source, rules, sourceFileIndex(db, 'bucket', source));
      expect(survey).toMatchObject({ unchanged: false, files: 1, changedFolders: null });
    } finally {
      db.close();
    }
  });

  it('ends its walk once the least metadata of what it found passes the limit, when told to', async () => {
    const source = scratchDir();
    // Each file of its own size: files of one size and mtime (written in the same millisecond)
    // are one node, counted once, by the first folder walked, and the floor would pass a fifth
    // of the tree's with that folder alone.
    for (let file = 0; file < 200; file += 1)
      writeSettled(
        path.join(source, `folder-${file % 10}`, `file-${file}.txt`),
        'x'.repeat(file + 1),
      );
    const db = openStateDatabase(path.join(scratchDir(), 'state.sqlite'));
    try {
      const rules = await loadExcludeRules(source);
      const index = sourceFileIndex(db, 'bucket', source);
      const survey = (limit?: { bytes: number; stop: boolean }) => {
        let found = 0;
        const surveyed = surveySource(source, rules, index, {
          onFile: () => (found += 1),
          ...(limit ? { metadataLimit: limit } : {}),
        });
        return surveyed.then((result) => ({ found, floor: result.metadataFloorBytes }));
      };
      const whole = await survey();
      expect(whole.found).toBe(200);
      // About a fifth of the tree's floor: the walk stops a fifth of the way in, give or take
      // the folder it is in.
      const limit = Math.round(whole.floor / 5);
      const stopped = await survey({ bytes: limit, stop: true });
      expect(stopped.floor).toBeGreaterThan(limit);
      expect(stopped.found).toBeGreaterThan(20);
      expect(stopped.found).toBeLessThan(80);
      // Not told to stop (a dry run, which counts everything), it walks on.
      const counted = await survey({ bytes: limit, stop: false });
      expect(counted.found).toBe(200);
      expect(counted.floor).toBeGreaterThan(limit);
      expect(counted.floor).toBeLessThan(whole.floor);
    } finally {
      db.close();
    }
  });
});
