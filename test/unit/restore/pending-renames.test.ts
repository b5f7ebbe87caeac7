import { afterAll, describe, expect, it } from 'vitest';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSystemFlush } from '../../../main/restore/file-system-flush.ts';
import { PendingRenames, type UnrenamedFile } from '../../../main/restore/pending-renames.ts';

// Written files get their real names only in batches, once on disk: a flush that fails leaves
// each fsynced by itself and renamed all the same, and every later file fsynced as it is
// written; a name the disk refuses is reported as not restored, and the rest are renamed; a
// name taken while a file waited is left to what took it, unless the restore may replace.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-pending-renames-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A file written under a temporary name in `dir`, to be renamed to `name`. */
function written(dir: string, name: string, synced: boolean): UnrenamedFile {
  const temporary = path.join(dir, `.canopy-restore-test-${name}`);
  writeFileSync(temporary, name);
  return {
    temporary,
    target: path.join(dir, name),
    bytes: name.length,
    synced,
    relative: name,
    folded: name,
  };
}

/** Never replacing: a name taken gives way to the same name with " (beside)". */
const BESIDE = {
  replace: false,
  nameBeside: (target: string) => `${target} (beside)`,
  notReplaced: (target: string) => {
    throw new Error(`${target} was not to be replaced`);
  },
};

describe('PendingRenames', () => {
  it('renames each file once a failed flush gave way to an fsync of it, and flushes no more', async () => {
    const dir = path.join(scratch, 'failed-flush');
    mkdirSync(dir);
    // `false` stands for a sync program that reports an I/O error.
    const flush = FileSystemFlush.forFolder(dir, 'false');
    if (!flush) throw new Error('the scratch folder is on a file system that is never flushed');
    const renamed: string[] = [];
    const failures: unknown[] = [];
    const renames = new PendingRenames(
      flush,
      2,
      {
        renamed: (file) => renamed.push(file.relative),
        refused: (relative) => failures.push(relative),
        failed: (error) => failures.push(error),
      },
      BESIDE,
    );
    expect(renames.flushCovers(dir)).toBe(true);
    for (const name of ['a', 'b', 'c']) renames.add(written(dir, name, false));
    expect(renames.has('b')).toBe(true);
    await renames.renameWritten();
    expect(failures).toEqual([]);
    expect(renamed.sort()).toEqual(['a', 'b', 'c']);
    expect(readdirSync(dir).sort()).toEqual(['a', 'b', 'c']);
    expect(readFileSync(path.join(dir, 'b'), 'utf8')).toBe('b');
    expect(renames.has('b')).toBe(false);
    expect(renames.flushCovers(dir)).toBe(false);
  });

  it('fsyncs a batch no larger than it fsyncs at once, and flushes a larger one', async () => {
    const dir = path.join(scratch, 'small-batch');
    mkdirSync(dir);
    // A sync program that logs each call and does as the real one does.
    const log = path.join(scratch, 'small-batch-sync.log');
    const sync = path.join(scratch, 'small-batch-sync');
    writeFileSync(sync, `#!/bin/sh\necho "$@" >> '${log}'\nexec /bin/sync "$@"\n`, {
      mode: 0o755,
    });
    const flush = FileSystemFlush.forFolder(dir, sync);
    if (!flush) throw new Error('the scratch folder is on a file system that is never flushed');
    const renamed: string[] = [];
    const renames = new PendingRenames(
      flush,
      2,
      {
        renamed: (file) => renamed.push(file.relative),
        refused: (relative) => {
          throw new Error(`refused ${relative}`);
        },
        failed: (error) => {
          throw error;
        },
      },
      BESIDE,
    );
    try {
      for (const name of ['a', 'b']) renames.add(written(dir, name, false));
      await renames.renameWritten();
      expect(renamed.sort()).toEqual(['a', 'b']);
      expect(existsSync(log)).toBe(false);
      for (const name of ['c', 'd', 'e']) renames.add(written(dir, name, false));
      await renames.renameWritten();
      expect(renamed.sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(readFileSync(log, 'utf8')).toBe(`-f -- ${dir}\n`);
      expect(readdirSync(dir).sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    } finally {
      flush.close();
    }
  });

  it('reports a name the disk refuses, and renames the others', async () => {
    const dir = path.join(scratch, 'refused-name');
    mkdirSync(dir);
    const refused: Array<[string, string]> = [];
    const renamed: string[] = [];
    const renames = new PendingRenames(
      undefined,
      2,
      {
        renamed: (file) => renamed.push(file.relative),
        refused: (relative, reason) => refused.push([relative, reason]),
        failed: (error) => {
          throw error;
        },
      },
      BESIDE,
    );
    renames.add(written(dir, 'kept', true));
    // A name longer than the file system holds (255 bytes on ext4).
    const long = written(dir, 'x', true);
    renames.add({
      ...long,
      target: path.join(dir, 'y'.repeat(300)),
      relative: 'long',
      folded: 'long',
    });
    await renames.renameWritten();
    expect(renamed).toEqual(['kept']);
    expect(refused.map(([relative]) => relative)).toEqual(['long']);
    expect(readdirSync(dir)).toEqual(['kept']);
  });

  it('puts a file beside one made under its name while it waited, and replaces it only if asked', async () => {
    for (const replace of [false, true]) {
      const dir = path.join(scratch, `taken-meanwhile-${replace}`);
      mkdirSync(dir);
      const placed: string[] = [];
      const renames = new PendingRenames(
        undefined,
        2,
        {
          renamed: (_file, placedAt) => placed.push(path.basename(placedAt)),
          refused: (relative) => {
            throw new Error(`refused ${relative}`);
          },
          failed: (error) => {
            throw error;
          },
        },
        { ...BESIDE, replace },
      );
      renames.add(written(dir, 'report', true));
      // The user saves a file of that name before the restored one is renamed.
      writeFileSync(path.join(dir, 'report'), 'the user saved this');
      await renames.renameWritten();
      if (replace) {
        expect(placed).toEqual(['report']);
        expect(readFileSync(path.join(dir, 'report'), 'utf8')).toBe('report');
      } else {
        expect(placed).toEqual(['report (beside)']);
        expect(readFileSync(path.join(dir, 'report'), 'utf8')).toBe('the user saved this');
        expect(readFileSync(path.join(dir, 'report (beside)'), 'utf8')).toBe('report');
      }
      // No temporary name is left.
      expect(readdirSync(dir).sort()).toEqual(replace ? ['report'] : ['report', 'report (beside)']);
    }
  });
});
