import { afterEach, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sampleIndexLeaves } from '../../../main/engine/index-leaf-sample.ts';
import { CHUNK_BYTES } from '../../../main/packer/index.ts';
import { openStateDatabase, type StateDb } from '../../../main/state/database.ts';
import { sourceFileIndex, type IndexedEntry } from '../../../main/state/file-index.ts';

// The blocks a backup fetches again once it is stored are random leaves of its version, taken
// from the file index that describes it (on a real SQLite file here): every leaf as likely as
// any other, each with its size, and none when the index cannot say.

const dirs: string[] = [];
const dbs: StateDb[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) db.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function digestOf(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** A file of `size` bytes whose leaves' digests are those of `name#0`, `name#1`, … */
function file(name: string, size: number, leavesListed = Math.ceil(size / CHUNK_BYTES)) {
  const leaves = Buffer.concat(
    Array.from({ length: leavesListed }, (_, leaf) => digestOf(`${name}#${leaf}`)),
  );
  const entry: IndexedEntry = {
    path: name,
    kind: 'file',
    size,
    mtimeNs: 1_700_000_000_000_000_000n,
    ctimeNs: 1_700_000_000_000_000_000n,
    ino: BigInt(name.length),
    mode: 0o644,
    target: null,
    cid: `bafy-file-${name}`,
    nodeSize: null,
    leaves,
  };
  return entry;
}

/** The index of a source holding `files`, describing version 'v'. */
function indexOf(files: readonly IndexedEntry[]) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-leaf-sample-'));
  dirs.push(dir);
  const db = openStateDatabase(path.join(dir, 'state.sqlite'));
  dbs.push(db);
  const staged = sourceFileIndex(db, 'bucket', '/src').stage();
  staged.add({ ...file('', 0), kind: 'directory', leaves: null, cid: 'bafy-root' });
  for (const entry of files) staged.add(entry);
  staged.commit('v', { paths: [], filesModifiedFromNs: 2n ** 63n - 1n });
  return sourceFileIndex(db, 'bucket', '/src');
}

/** The name and leaf number a sampled leaf's digest stands for. */
function named(digests: Map<string, string>, leaf: { cid: { multihash: { digest: Uint8Array } } }) {
  return digests.get(Buffer.from(leaf.cid.multihash.digest).toString('hex'));
}

function digestNames(files: ReadonlyArray<{ name: string; leaves: number }>): Map<string, string> {
  const names = new Map<string, string>();
  for (const { name, leaves } of files)
    for (let leaf = 0; leaf < leaves; leaf += 1)
      names.set(digestOf(`${name}#${leaf}`).toString('hex'), `${name}#${leaf}`);
  return names;
}

describe('a sample of the leaves of the version a file index describes', () => {
  it('gives every leaf, as raw CIDs with their sizes, when fewer than asked, and none of an empty file', () => {
    const size = 2 * CHUNK_BYTES + 10;
    const index = indexOf([file('movie.mp4', size), file('note.txt', 10), file('empty', 0, 0)]);
    const sample = sampleIndexLeaves(index, 8, 3);
    const digests = digestNames([
      { name: 'movie.mp4', leaves: 3 },
      { name: 'note.txt', leaves: 1 },
    ]);
    expect(
      sample?.map((leaf) => `${named(digests, leaf) ?? '?'} ${leaf.size} ${leaf.cid.code}`).sort(),
    ).toEqual([
      `movie.mp4#0 ${CHUNK_BYTES} 85`,
      `movie.mp4#1 ${CHUNK_BYTES} 85`,
      'movie.mp4#2 10 85',
      'note.txt#0 10 85',
    ]);
  });

  it('chooses each leaf as often as any other, whichever file holds it', () => {
    // One file of 90 leaves and ten of one: nine leaves in ten are the large file's.
    const files = [file('large.iso', 90 * CHUNK_BYTES)];
    for (let n = 0; n < 10; n += 1) files.push(file(`small-${n}`, 100));
    const index = indexOf(files);
    const digests = digestNames([
      { name: 'large.iso', leaves: 90 },
      ...Array.from({ length: 10 }, (_, n) => ({ name: `small-${n}`, leaves: 1 })),
    ]);
    let large = 0;
    const rounds = 2000;
    for (let round = 0; round < rounds; round += 1) {
      const [leaf] = sampleIndexLeaves(index, 1, 11) ?? [];
      if (!leaf) throw new Error('no leaf sampled');
      if (named(digests, leaf)?.startsWith('large.iso#') === true) large += 1;
    }
    // 1 800 expected; the binomial's spread is about 13.
    expect(large).toBeGreaterThan(1700);
    expect(large).toBeLessThan(1900);
  });

  it('gives up when the version holds files the index left out, or a file lacks leaves', () => {
    // A file written the moment before the backup is in the version, but not in the index,
    // which has the next backup read it again: a sample without it would leave out the newest.
    const index = indexOf([file('old.txt', 10)]);
    expect(sampleIndexLeaves(index, 8, 1)).toHaveLength(1);
    expect(sampleIndexLeaves(index, 8, 2)).toBeUndefined();
    const damaged = indexOf([file('cut.bin', 3 * CHUNK_BYTES, 2)]);
    expect(sampleIndexLeaves(damaged, 8, 1)).toBeUndefined();
    expect(sampleIndexLeaves(indexOf([]), 8, 0)).toEqual([]);
  });
});
