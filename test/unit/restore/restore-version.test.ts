import { UnixFS } from 'ipfs-unixfs';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LeafSizes, MetadataNodes } from '../../../main/packer/index.ts';
import { restoreVersion } from '../../../main/restore/index.ts';
import type { ServiceClient } from '../../../main/service/index.ts';
import { putNode } from '../../helpers/dag-pb-node.ts';

// A version from a hostile or broken server may name an entry so that it would land outside
// the restore's folder ("..", "a/b"): the restore stops before it makes, or even looks at,
// anything by such a name, whether its folder was there already or not.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-unsafe-names-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A tree whose root folder holds a link named `name` to a symlink to "/etc/passwd". */
async function treeWithEntry(name: string) {
  const nodes = new MetadataNodes();
  const link = await putNode(nodes, {
    Data: new UnixFS({ type: 'symlink', data: new TextEncoder().encode('/etc/passwd') }).marshal(),
    Links: [],
  });
  const root = await putNode(nodes, {
    Data: new UnixFS({ type: 'directory' }).marshal(),
    Links: [{ Name: name, Hash: link, Tsize: 0 }],
  });
  return { manifest: { root }, leaves: new LeafSizes(), nodes };
}

describe('restoreVersion', () => {
  for (const name of ['..', '.', 'a/b', ''])
    it(`refuses an entry named ${JSON.stringify(name)} and makes nothing`, async () => {
      const parent = path.join(scratch, `parent-${readdirSync(scratch).length}`);
      const target = path.join(parent, 'target');
      mkdirSync(target, { recursive: true });
      writeFileSync(path.join(target, 'mine.txt'), 'the user’s');
      await expect(
        restoreVersion({
          // No leaf is ever asked for: the tree has none.
          client: {} as ServiceClient,
          storageHost: 'http://127.0.0.1:9',
          tree: await treeWithEntry(name),
          targetDir: target,
          overwrite: false,
        }),
      ).rejects.toMatchObject({
        code: 'protocol',
        message: `the version holds an unsafe name ${JSON.stringify(name)}; restore stopped`,
      });
      expect(readdirSync(parent)).toEqual(['target']);
      expect(readdirSync(target)).toEqual(['mine.txt']);
    });
});
