import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startLocalService } from '../../cli/local-service.ts';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine } from '../../main/index.ts';
import { stateFileOf } from '../../main/state/index.ts';

// The room a deleted bucket's records took in the state database goes back to the disk: a
// backup's passing rows use freed pages again, but a bucket gone never comes back for them.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-state-space-'));
const home = path.join(scratch, 'home');
let engine: Engine;
/** The version of the bucket that stays. */
let fewVersion: string;

/** The state database's pages in all and free ones, as another process sees them. */
function pagesOfState(): { pages: number; free: number } {
  const db = new Database(stateFileOf(home), { readonly: true });
  try {
    return {
      pages: Number(db.pragma('page_count', { simple: true })),
      free: Number(db.pragma('freelist_count', { simple: true })),
    };
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  const many = path.join(scratch, 'many');
  mkdirSync(many);
  for (let file = 0; file < 3000; file += 1)
    writeFileSync(path.join(many, `note-${file}.txt`), `note number ${file}`);
  const few = path.join(scratch, 'few');
  mkdirSync(few);
  writeFileSync(path.join(few, 'todo.txt'), 'water the plants');
  engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
  await engine.loginLocal({});
  for (const [name, dir] of [
    ['Many', many],
    ['Few', few],
  ] as const) {
    await engine.createBucket({ name, type: 'backup', storageClass: 'hot' });
    fewVersion = (await engine.backup({ dir, bucket: name })).versionId;
  }
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the state database', () => {
  it("gives back to the disk the room a deleted bucket's records took", async () => {
    const before = pagesOfState();
    await engine.deleteBucket({ name: 'Many' });
    const after = pagesOfState();
    expect(after.free).toBe(0);
    expect(after.pages).toBeLessThan(before.pages / 2);
    // What the other bucket keeps is all there: its next backup finds its folder unchanged.
    const again = await engine.backup({ dir: path.join(scratch, 'few'), bucket: 'Few' });
    expect(again).toMatchObject({ versionId: fewVersion, unchanged: true });
  });
});
