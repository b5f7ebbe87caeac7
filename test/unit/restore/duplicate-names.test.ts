import { UnixFS } from 'ipfs-unixfs';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LeafSizes, MetadataNodes } from '../../../main/packer/index.ts';
import { restoreVersion } from '../../../main/restore/index.ts';
import type { ServiceClient } from '../../../main/service/index.ts';
import { putNode } from '../../helpers/dag-pb-node.ts';

// A version from a hostile or broken server may name two entries of a folder alike: first a
// symbolic link to a folder outside the restore's, then a folder whose files would be written
// through that link (the attack tar had to learn to refuse). The restore writes nothing
// outside its folder, whether it may overwrite or not.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-duplicate-names-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A tree whose root holds `a`, a link to `outside`, and then `a`, a folder holding a file. */
async function treeThroughLink(outside: string) {
  const nodes = new MetadataNodes();
  const link = await putNode(nodes, {
    Data: new UnixFS({ type: 'symlink', data: new TextEncoder().encode(outside) }).marshal(),
    Links: [],
  });
  const emptyFile = await putNode(nodes, {
    Data: new UnixFS({ type: 'file' }).marshal(),
    Links: [],
  });
  const folder = await putNode(nodes, {
    Data: new UnixFS({ type: 'directory' }).marshal(),
    Links: [{ Name: 'planted.sh', Hash: emptyFile, Tsize: 0 }],
  });
  const root = await putNode(nodes, {
    Data: new UnixFS({ type: 'directory' }).marshal(),
    Links: [
      { Name: 'a', Hash: link, Tsize: 0 },
      { Name: 'a', Hash: folder, Tsize: 0 },
    ],
  });
  return { manifest: { root }, leaves: new LeafSizes(), nodes };
}

describe('a version naming a link and a folder alike', () => {
  for (const overwrite of [false, true])
    it(`writes nothing through the link${overwrite ? ', with --overwrite' : ''}`, async () => {
      const run = path.join(scratch, overwrite ? 'overwrite' : 'kept');
      const outside = path.join(run, 'outside');
      const target = path.join(run, 'target');
      mkdirSync(outside, { recursive: true });
      mkdirSync(target);
      const result = await restoreVersion({
        // No leaf is ever asked for: the only file is empty.
        client: {} as ServiceClient,
        storageHost: 'http://127.0.0.1:9',
        tree: await treeThroughLink(outside),
        targetDir: target,
        overwrite,
      });
      expect(readdirSync(outside)).toEqual([]);
      if (overwrite) {
        // The later entry takes the name, as a folder.
        expect(readdirSync(target)).toEqual(['a']);
        expect(lstatSync(path.join(target, 'a')).isDirectory()).toBe(true);
        expect(readdirSync(path.join(target, 'a'))).toEqual(['planted.sh']);
      } else {
        // The later entry is kept beside the earlier, as any clash is.
        expect(result.renamed).toEqual(['a (restored)']);
        expect(lstatSync(path.join(target, 'a')).isSymbolicLink()).toBe(true);
        expect(readdirSync(path.join(target, 'a (restored)'))).toEqual(['planted.sh']);
      }
    });
});
