import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  chmodSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  loadExcludeRules,
  walkSource,
  type SkippedItem,
  type SourceEntry,
} from '../../../main/scanner/index.ts';
import { readFoldersHere, type FolderReader } from '../../../main/scanner/folder-reader.ts';
import { StatAheadReader, WORKER_SOURCE } from '../../../main/scanner/stat-ahead-reader.ts';

// A rescan of a large source walks it with a worker thread listing folders and looking at
// their entries ahead of the walk (stat-ahead-reader.ts). What it finds, and what it passes
// over and why, must be exactly what the walk finds on its own: the file index compares it
// with what that walk found last time.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-walk-ahead-'));
const servers: Server[] = [];
afterAll(async () => {
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
  rmSync(scratch, { recursive: true, force: true });
});

interface Walked {
  readonly entries: SourceEntry[];
  readonly skipped: SkippedItem[];
  readonly excluded: string[];
}

async function walked(root: string, ahead: boolean, withRules = false): Promise<Walked> {
  const entries: SourceEntry[] = [];
  const skipped: SkippedItem[] = [];
  const excluded: string[] = [];
  const rules = withRules ? await loadExcludeRules(root) : undefined;
  for await (const entry of walkSource(root, {
    ahead,
    ...(rules ? { rules } : {}),
    onSkip: (item) => skipped.push(item),
    onExcluded: (item) => excluded.push(item),
  }))
    entries.push(entry);
  return { entries, skipped, excluded };
}

/** A socket bound at `file`, as a running program leaves one. */
async function socketAt(file: string): Promise<void> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(file, resolve));
}

/**
 * Each folder under `root` as `reader` lists it, in the walk's order (a folder's names, then
 * the folders inside it, each whole before the next): every name with its type, size, mtime
 * and inode, or the code of the lstat that failed.
 */
async function listedTree(reader: FolderReader, root: string): Promise<string[]> {
  const seen: string[] = [];
  const visit = async (folder: string): Promise<void> => {
    const listed = await reader.list(folder);
    const inside: string[] = [];
    listed.names.forEach((name, index) => {
      try {
        const stats = listed.stats(index);
        seen.push(`${folder}/${name} ${stats.type} ${stats.size} ${stats.mtimeNs} ${stats.ino}`);
        if (stats.type === 'directory') inside.push(path.join(folder, name));
      } catch (error) {
        seen.push(`${folder}/${name} ${(error as NodeJS.ErrnoException).code}`);
      }
    });
    for (const next of inside) await visit(next);
  };
  try {
    await visit(root);
  } finally {
    await reader.close?.();
  }
  return seen;
}

describe('the walk with a worker listing ahead', () => {
  it('lists the folders left on its own thread when the worker stops, or never starts', async () => {
    const root = path.join(scratch, 'crashing');
    for (let folder = 0; folder < 120; folder += 1) {
      mkdirSync(path.join(root, `d${folder}`, 'inner'), { recursive: true });
      writeFileSync(path.join(root, `d${folder}`, 'inner', 'file'), `file ${folder}`);
    }
    // A worker that answers five folders, and stops as a crash would on the sixth asked.
    const stopsAfterFive = `
      let asked = 0;
      require('node:worker_threads').parentPort.on('message', () => {
        asked += 1;
        if (asked > 5) process.exit(7);
      });
      ${WORKER_SOURCE}`;
    const alone = await listedTree(readFoldersHere, root);
    expect(alone).toHaveLength(120 * 3);
    expect(await listedTree(new StatAheadReader(root, stopsAfterFive), root)).toEqual(alone);
    expect(
      await listedTree(new StatAheadReader(root, 'throw new Error("no start")'), root),
    ).toEqual(alone);
    expect(await listedTree(new StatAheadReader(root), root)).toEqual(alone);
  });

  it('finds what the walk finds alone, in its order, and passes over the same items for the same reasons', async () => {
    const root = path.join(scratch, 'mixed');
    // Many folders side by side (more than it asks ahead), a deep chain, and odd names.
    for (let folder = 0; folder < 150; folder += 1) {
      const dir = path.join(root, 'events', `e${folder}`);
      mkdirSync(dir, { recursive: true });
      for (let file = 0; file < 3; file += 1) writeFileSync(path.join(dir, `p${file}.jpg`), 'x');
    }
    let deep = path.join(root, 'deep');
    for (let level = 0; level < 40; level += 1) deep = path.join(deep, `level ${level}`);
    mkdirSync(deep, { recursive: true });
    writeFileSync(path.join(deep, 'bottom.txt'), 'the bottom');
    for (const name of ['😀 face', '\uE000 private', 'é', 'e\u0301', 'line\nbreak', 'a-b', 'a.b'])
      writeFileSync(path.join(root, name), name);
    mkdirSync(path.join(root, 'a'));
    writeFileSync(path.join(root, 'a', 'inner'), 'inner');
    // Old, executable, empty, and a folder with nothing in it.
    writeFileSync(path.join(root, 'script.sh'), '#!/bin/sh\n');
    chmodSync(path.join(root, 'script.sh'), 0o755);
    utimesSync(path.join(root, 'script.sh'), new Date('1969-07-20'), new Date('1969-07-20'));
    writeFileSync(path.join(root, 'empty'), '');
    mkdirSync(path.join(root, 'nothing here'));
    // Links, kept as links: to a folder, dangling, and a loop.
    symlinkSync('events', path.join(root, 'to-events'));
    symlinkSync('missing', path.join(root, 'dangling'));
    symlinkSync('loop', path.join(root, 'loop'));
    // What is never stored: a named pipe and a socket; and a name that is not UTF-8.
    execFileSync('mkfifo', [path.join(root, 'pipe')]);
    await socketAt(path.join(root, 'events', 'e7', 'program.sock'));
    writeFileSync(Buffer.from(`${path.join(root, 'a')}/bad-\xff-name`, 'latin1'), 'bytes');

    const alone = await walked(root, false);
    const ahead = await walked(root, true);
    expect(ahead).toEqual(alone);
    // The tree is what the comparison is of: every kind of item above is in it.
    expect(alone.entries.length).toBeGreaterThan(600);
    expect(alone.entries.map((entry) => entry.kind)).toContain('symlink');
    expect(alone.skipped.map((item) => item.reason)).toEqual(
      expect.arrayContaining([
        'named pipe (not backed up)',
        'socket (not backed up)',
        expect.stringContaining('not valid UTF-8'),
      ]),
    );
  });

  it('passes over the folders the rules exclude as the walk does, however many', async () => {
    const root = path.join(scratch, 'excluded');
    // More excluded folders than it asks ahead: each asked for and passed over must not hold
    // back the folders after them.
    for (let folder = 0; folder < 100; folder += 1) {
      mkdirSync(path.join(root, `f${folder}`, '.cache', 'deeper'), { recursive: true });
      writeFileSync(path.join(root, `f${folder}`, '.cache', 'deeper', 'junk'), 'junk');
      writeFileSync(path.join(root, `f${folder}`, 'kept.txt'), 'kept');
    }
    writeFileSync(path.join(root, '.canopyignore'), 'f9*/\n');
    const alone = await walked(root, false, true);
    const ahead = await walked(root, true, true);
    expect(ahead).toEqual(alone);
    expect(alone.excluded).toContain('f3/.cache');
    expect(alone.excluded).toContain('f90');
    expect(alone.entries.map((entry) => entry.path)).toContain('f3/kept.txt');
    expect(alone.entries.map((entry) => entry.path)).not.toContain('f90/kept.txt');
  });

  it('reports a folder gone before it was listed, and stops its worker when the walk stops early', async () => {
    const root = path.join(scratch, 'changing');
    for (let folder = 0; folder < 200; folder += 1) {
      mkdirSync(path.join(root, `d${folder}`), { recursive: true });
      writeFileSync(path.join(root, `d${folder}`, 'file'), 'x');
    }
    const skipped: SkippedItem[] = [];
    const found: string[] = [];
    const walk = walkSource(root, { ahead: true, onSkip: (item) => skipped.push(item) });
    for await (const entry of walk) {
      // Deleted once the walk is under way: d199 comes last, past what the worker was asked
      // for ahead, so its listing fails, as the walk's own would.
      if (found.length === 0) rmSync(path.join(root, 'd199'), { recursive: true });
      found.push(entry.path);
    }
    expect(found).toContain('d199');
    expect(found).not.toContain('d199/file');
    expect(found).toContain('d198/file');
    expect(skipped).toEqual([
      { path: 'd199', reason: 'cannot list: deleted while scanning', kind: 'changed' },
    ]);

    // A walk left after its first entry ends without waiting on its worker.
    const early = walkSource(root, { ahead: true, onSkip: () => undefined });
    await early.next();
    await early.return(undefined);
    expect((await early.next()).done).toBe(true);
  });
});
