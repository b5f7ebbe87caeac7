import { afterAll, describe, expect, it } from 'vitest';
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MetadataFloor, MetadataNodes, packSource } from '../../../main/packer/index.ts';
import { walkSource } from '../../../main/scanner/index.ts';
import { seededRandom, type SeededRandom } from '../../helpers/seeded-random.ts';

// The floor the walk counts must never be more than the metadata the packer writes for the
// same tree (a source that fits would be refused), and close enough below it to catch a source
// too large before its files are read. Besides the trees made by hand, random ones: a failing
// seed fails the same way again (FLOOR_SEED; FLOOR_RUNS for more trees than CI's).

const RUNS = Number(process.env['FLOOR_RUNS'] ?? 12);
const SEED = Number(process.env['FLOOR_SEED'] ?? 20261130);

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-metadata-floor-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function varintBytes(value: number): number {
  let bytes = 1;
  for (let rest = value; rest >= 0x80; rest = Math.floor(rest / 0x80)) bytes += 1;
  return bytes;
}

/** The bytes of the tree's nodes in its metadata CAR (each block's section), the manifest aside. */
async function packedNodeBytes(dir: string): Promise<number> {
  const nodes = new MetadataNodes();
  await packSource({
    nodes,
    sourceDir: dir,
    sourceLabel: 'test:/src',
    deviceFingerprint: 'a'.repeat(40),
    createdAtSeconds: 1_800_000_000,
    onLeaf: () => Promise.resolve(),
    onSkip: (item) => {
      throw new Error(`skipped ${item.path}: ${item.reason}`);
    },
  });
  let bytes = 0;
  for (const node of nodes.sorted()) {
    const section = node.cid.bytes.length + node.bytes.length;
    bytes += varintBytes(section) + section;
  }
  return bytes;
}

async function floorOf(dir: string): Promise<number> {
  const floor = new MetadataFloor();
  for await (const entry of walkSource(dir, {
    onSkip: (item) => {
      throw new Error(`skipped ${item.path}: ${item.reason}`);
    },
  }))
    floor.add(entry);
  return floor.finish();
}

function tree(name: string): string {
  const dir = path.join(scratch, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

const aYearAgo = new Date(Date.now() - 365 * 86_400_000);

/**
 * Writes a file dated `seconds` after a year ago: files written in a loop share their mtime to
 * the kernel's tick, and the floor counts files of one size and mtime once (their bytes unread).
 * A user's files each have a time of their own.
 */
function writeDated(file: string, bytes: string | Buffer, seconds: number): void {
  writeFileSync(file, bytes);
  const at = new Date(aYearAgo.getTime() + seconds * 1000);
  utimesSync(file, at, at);
}

describe('the metadata floor', () => {
  it('is below the packed metadata of small files in many folders, and within a sixth of it', async () => {
    const dir = tree('small-files');
    for (let folder = 0; folder < 40; folder += 1) {
      const sub = path.join(dir, `folder-${folder}`);
      mkdirSync(sub);
      for (let file = 0; file < 50; file += 1)
        writeDated(
          path.join(sub, `photo-${file}.jpg`),
          `folder ${folder} file ${file}`,
          folder * 50 + file,
        );
    }
    const [floor, packed] = [await floorOf(dir), await packedNodeBytes(dir)];
    expect(floor).toBeLessThanOrEqual(packed);
    expect(floor).toBeGreaterThan(packed * (5 / 6));
  });

  it('counts a copied folder once, as the CAR holds its nodes once, even with one file changed', async () => {
    const dir = tree('copies');
    const original = path.join(dir, 'original');
    mkdirSync(path.join(original, 'inner'), { recursive: true });
    for (let file = 0; file < 300; file += 1) {
      const at = path.join(original, file % 2 === 0 ? 'inner' : '', `file-${file}.txt`);
      writeDated(at, `file ${file}`, file);
    }
    symlinkSync('inner/file-0.txt', path.join(original, 'link'));
    for (const copy of ['copy-1', 'copy-2', 'copy-3'])
      cpSync(original, path.join(dir, copy), { recursive: true, preserveTimestamps: true });
    // A copy with one file other than the original's: its folder nodes differ, its files' not.
    writeFileSync(path.join(dir, 'copy-3', 'inner', 'file-0.txt'), 'changed');
    // Folders dated alike, as a copy that keeps times leaves them: the same nodes.
    for (const folder of ['original', 'copy-1', 'copy-2', 'copy-3'])
      for (const inside of ['inner', ''])
        utimesSync(path.join(dir, folder, inside), aYearAgo, aYearAgo);
    const [floor, packed] = [await floorOf(dir), await packedNodeBytes(dir)];
    expect(floor).toBeLessThanOrEqual(packed);
    expect(floor).toBeGreaterThan(packed * (2 / 3));
  });

  it('is below the packed metadata of large files, long and unicode names, and a sharded folder', async () => {
    const dir = tree('mixed');
    writeFileSync(path.join(dir, 'large.bin'), Buffer.alloc(5 * 1024 * 1024 + 1, 7));
    writeFileSync(path.join(dir, 'empty'), '');
    writeFileSync(path.join(dir, `${'é'.repeat(120)}.txt`), 'long name');
    symlinkSync('/a/target/far/away', path.join(dir, 'away'));
    const sharded = path.join(dir, 'sharded');
    mkdirSync(sharded);
    for (let file = 0; file < 3000; file += 1)
      writeDated(path.join(sharded, `entry-with-a-name-${file}`), `${file}`, file);
    const [floor, packed] = [await floorOf(dir), await packedNodeBytes(dir)];
    expect(floor).toBeLessThanOrEqual(packed);
    expect(floor).toBeGreaterThan(packed * (2 / 3));
  });

  it('counts a file and its identical twin in another folder once', async () => {
    const dir = tree('twins');
    for (const folder of ['a', 'b']) {
      mkdirSync(path.join(dir, folder));
      const file = path.join(dir, folder, 'same.txt');
      writeFileSync(file, 'the same bytes');
      utimesSync(file, aYearAgo, aYearAgo);
    }
    writeFileSync(path.join(dir, 'b', 'other.txt'), 'only in b');
    const floor = await floorOf(dir);
    expect(floor).toBeLessThanOrEqual(await packedNodeBytes(dir));
  });

  it(`is below the packed metadata of ${RUNS} random trees (seed ${SEED})`, async () => {
    for (let run = 0; run < RUNS; run += 1) {
      const random = seededRandom(SEED + run);
      // xorshift's first numbers from seeds next to each other are alike: passed over.
      for (let skip = 0; skip < 20; skip += 1) random.next();
      const dir = tree(`random-${run}`);
      makeRandomTree(random, dir, 0);
      // A copy of a folder, its times kept: the same nodes, which the CAR holds once.
      const folders = readdirSync(dir, { withFileTypes: true }).filter((entry) =>
        entry.isDirectory(),
      );
      const copied = random.pick(folders);
      for (let copies = 0; copied && copies < 3; copies += 1) {
        const copy = path.join(dir, `${copied.name}-copy-${copies}`);
        cpSync(path.join(dir, copied.name), copy, {
          recursive: true,
          preserveTimestamps: true,
          verbatimSymlinks: true,
        });
        const { atime, mtime } = statSync(path.join(dir, copied.name));
        utimesSync(copy, atime, mtime);
      }
      const [floor, packed] = [await floorOf(dir), await packedNodeBytes(dir)];
      expect(floor, `the floor of tree ${run} (seed ${SEED + run})`).toBeLessThanOrEqual(packed);
    }
  });
});

/** Names of all kinds: short, long, accented, wide, astral (two UTF-16 units, four bytes). */
const NAME_PARTS = ['a', 'photo', 'é', '日本', '😀', 'x'.repeat(90), 'Ünïcödé', ' ', '.hidden'];
/** A few times, so that files and folders share some. */
const TIMES = [0, 1, 2, 1_000_000, 86_400].map(
  (seconds) => new Date(aYearAgo.getTime() + seconds * 1000),
);
const MODES = [0o644, 0o600, 0o755, 0o640];

function randomName(random: SeededRandom, taken: Set<string>): string {
  for (;;) {
    const parts = 1 + random.below(3);
    let name = '';
    for (let part = 0; part < parts; part += 1) name += random.pick(NAME_PARTS) ?? 'a';
    name = `${name}${random.below(100)}`.trim();
    if (name !== '' && !taken.has(name)) {
      taken.add(name);
      return name;
    }
  }
}

function randomBytesOf(random: SeededRandom): Buffer {
  switch (random.below(6)) {
    case 0:
      return Buffer.alloc(0);
    case 1:
      return Buffer.from('the same bytes');
    case 2:
      return Buffer.alloc(1024 * 1024 + random.below(3) - 1, random.below(3));
    default:
      return Buffer.from(`bytes ${random.below(1_000_000)}`);
  }
}

/** Fills `dir` with random files, symlinks and folders, `depth` folders down. */
function makeRandomTree(random: SeededRandom, dir: string, depth: number): void {
  const taken = new Set<string>();
  const entries = 1 + random.below(depth === 0 ? 12 : 8);
  for (let entry = 0; entry < entries; entry += 1) {
    const at = path.join(dir, randomName(random, taken));
    const kind = random.below(10);
    if (kind < 2 && depth < 3) {
      mkdirSync(at);
      makeRandomTree(random, at, depth + 1);
      chmodSync(at, random.pick([0o755, 0o700]) ?? 0o755);
    } else if (kind < 3) {
      symlinkSync(random.pick(['a', '../日本', 'x'.repeat(200), '/etc/hostname']) ?? 'a', at);
    } else {
      writeFileSync(at, randomBytesOf(random));
      chmodSync(at, random.pick(MODES) ?? 0o644);
      const time = random.pick(TIMES) ?? aYearAgo;
      utimesSync(at, time, time);
    }
  }
  const time = random.pick(TIMES) ?? aYearAgo;
  utimesSync(dir, time, time);
}
