import { afterAll, describe, expect, it } from 'vitest';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as dagPb from '@ipld/dag-pb';
import { UnixFS } from 'ipfs-unixfs';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';
import { WALK_AHEAD_FROM_ENTRIES } from '../../main/uploader/unchanged-source.ts';
import { MetadataNodes, packSource } from '../../main/packer/index.ts';

// A 10 000-entry directory is written as a HAMT shard (§17.1) and round-trips.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-hamt-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('large directories', () => {
  it('packs 10 000 entries as a HAMT and restores every one', async () => {
    const source = path.join(scratch, 'source');
    const big = path.join(source, 'inbox');
    mkdirSync(big, { recursive: true });
    // Dated a minute back: files written right before a backup are read again by the next.
    const aMinuteAgo = new Date(Date.now() - 60_000);
    for (let i = 0; i < 10_000; i += 1) {
      const file = path.join(big, `message-${i}.eml`);
      writeFileSync(file, `message ${i}\n`);
      utimesSync(file, aMinuteAgo, aMinuteAgo);
    }

    const nodes = new MetadataNodes();
    const walkAll = () =>
      packSource({
        nodes,
        sourceDir: source,
        sourceLabel: 'hamt',
        deviceFingerprint: '0'.repeat(40),
        createdAtSeconds: 0,
        onLeaf: () => Promise.resolve(),
        onSkip: () => undefined,
      });
    await walkAll();
    const types = new Set<string>();
    for (const block of nodes.sorted()) {
      const node = dagPb.decode(block.bytes);
      if (node.Data) types.add(UnixFS.unmarshal(node.Data).type);
    }
    expect(types.has('hamt-sharded-directory')).toBe(true);

    const home = path.join(scratch, 'home');
    const engine = createEngine({
      home,
      secrets: new FileSecretStore(home),
      startLocalService,
    });
    try {
      await engine.loginLocal({});
      await engine.createBucket({ name: 'Mail', type: 'backup', storageClass: 'hot' });
      const result = await engine.backup({ dir: source, bucket: 'Mail' });
      expect(result.files).toBe(10_000);
      // In name order, though the shard holds its entries in the order of their names' hashes.
      const listed = await engine.ls({ bucket: 'Mail', path: 'inbox' });
      const inOrder = Array.from({ length: 10_000 }, (_, i) => `message-${i}.eml`).sort();
      expect(listed.map((entry) => entry.name)).toEqual(inOrder);
      // Everything below the top, read through the shard: the folder, then each of its files.
      const all = await engine.ls({ bucket: 'Mail', recursive: true });
      expect(all[0]).toMatchObject({ path: 'inbox', type: 'directory' });
      expect(all.slice(1).map((entry) => entry.path)).toEqual(
        inOrder.map((name) => `inbox/${name}`),
      );
      const target = path.join(scratch, 'restored');
      await engine.restore({ bucket: 'Mail', to: target, overwrite: false });
      const names = readdirSync(path.join(target, 'inbox'));
      expect(names).toHaveLength(10_000);
      expect(readFileSync(path.join(target, 'inbox', 'message-9999.eml'), 'utf8')).toBe(
        'message 9999\n',
      );

      // A file added beside it: the sharded folder is reused whole, and the tree is the one a
      // walk of everything makes.
      writeFileSync(path.join(source, 'notes.txt'), 'notes');
      const next = await engine.backup({ dir: source, bucket: 'Mail' });
      expect(next).toMatchObject({ files: 10_001, filesUnchanged: 10_000 });
      const stored = (await engine.listVersions({ bucket: 'Mail' })).find(
        (version) => version.id === next.versionId,
      );
      expect(stored?.root_cid).toBe((await walkAll()).rootCid.toString());

      // Nothing changed since (the new file, written just now, is read once more when it is a
      // minute old): so many entries are walked with a worker listing ahead (whose findings
      // test/unit/scanner/walk-ahead.test.ts holds to the walk's own), and the rescan through it
      // reads nothing and makes no version.
      utimesSync(path.join(source, 'notes.txt'), aMinuteAgo, aMinuteAgo);
      const dated = await engine.backup({ dir: source, bucket: 'Mail' });
      expect(10_003).toBeGreaterThanOrEqual(WALK_AHEAD_FROM_ENTRIES);
      expect(await engine.backup({ dir: source, bucket: 'Mail' })).toMatchObject({
        unchanged: true,
        versionId: dated.versionId,
        filesUnchanged: 10_001,
        bytesRead: 0,
      });
    } finally {
      await engine.close();
    }
  });
});
