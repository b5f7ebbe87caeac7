import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { CarFileNodes } from '../../main/uploader/car-file-nodes.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { firstBackup } from '../helpers/first-backup.ts';

// A restore of many small files reads each file's node from the version's tree once per walk
// of the tree (it walks it twice at once: the leaf reads ahead, the writes behind), and once
// before, to count what the tree holds against its manifest (tree-totals.ts). It used to decode
// each node six times, which was about a tenth of the time a restore of 100 000 small files
// took.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-restore-many-'));
const source = path.join(scratch, 'source');
const home = path.join(scratch, 'home');
const FOLDERS = 20;
const SMALL_FILES = 600;
/** Three leaves and a File node above them, so not every file is a single leaf. */
const large = randomBytes(3 * 1024 * 1024 - 5);
/** The version's root, its folders and its files. */
const ENTRIES = 1 + FOLDERS + SMALL_FILES + 1;
let engine: Engine;

beforeAll(async () => {
  for (let i = 0; i < SMALL_FILES; i += 1) {
    const folder = path.join(source, `folder-${i % FOLDERS}`);
    if (i < FOLDERS) mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, `note-${i}.txt`), `note number ${i}\n`);
  }
  writeFileSync(path.join(source, 'folder-3', 'scan.pdf'), large);
  engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
  await firstBackup(engine, source, 'Notes');
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a restore of many small files', () => {
  it('writes every file, and finds them there when run again, reading each node of the tree once per walk and once to count', async () => {
    const target = path.join(scratch, 'restored');
    const nodeReads = vi.spyOn(CarFileNodes.prototype, 'get');
    try {
      const restored = await engine.restore({ bucket: 'Notes', to: target, overwrite: false });
      expect(restored).toMatchObject({ files: SMALL_FILES + 1, notRestored: [] });
      // The root, the folders and the files, each read by the count and the two walks, and by
      // nothing else.
      expect(nodeReads.mock.calls.length).toBe(3 * ENTRIES);
    } finally {
      nodeReads.mockRestore();
    }
    expect(readdirSync(target, { recursive: true })).toHaveLength(FOLDERS + SMALL_FILES + 1);
    for (const i of [0, 17, SMALL_FILES - 1])
      expect(
        readFileSync(path.join(target, `folder-${i % FOLDERS}`, `note-${i}.txt`), 'utf8'),
      ).toBe(`note number ${i}\n`);
    expect(readFileSync(path.join(target, 'folder-3', 'scan.pdf')).equals(large)).toBe(true);

    // Run again, it finds every file there already: one more walk, to compare what is there.
    const again = vi.spyOn(CarFileNodes.prototype, 'get');
    try {
      const restored = await engine.restore({ bucket: 'Notes', to: target, overwrite: false });
      expect(restored).toMatchObject({ files: 0, alreadyThere: SMALL_FILES + 1, renamed: [] });
      expect(again.mock.calls.length).toBe(4 * ENTRIES);
    } finally {
      again.mockRestore();
    }
  });
});
