import { UnixFS } from 'ipfs-unixfs';
import { describe, expect, it } from 'vitest';
import { MetadataNodes } from '../../../main/packer/index.ts';
import { itemChange, itemLookAt } from '../../../main/restore/index.ts';
import { putNode } from '../../helpers/dag-pb-node.ts';

// How `canopy history` tells one path's versions apart: a link by its target, a folder by what
// it holds and not its own time, any entry by a mode or a time a restore would set otherwise.

interface Shape {
  readonly linkTarget: string;
  readonly folderMode?: number;
  /** The folder's own time, in whole seconds. */
  readonly folderSecs?: number;
  /** The link's time: whole seconds and nanoseconds. */
  readonly linkTime?: [number, number];
}

/** A version holding `docs/`, which holds the link `latest`. */
async function version(shape: Shape) {
  const nodes = new MetadataNodes();
  const [secs, nsecs] = shape.linkTime ?? [1_700_000_000, 0];
  const link = await putNode(nodes, {
    Data: new UnixFS({
      type: 'symlink',
      data: new TextEncoder().encode(shape.linkTarget),
      mtime: { secs: BigInt(secs), nsecs },
    }).marshal(),
    Links: [],
  });
  const docs = await putNode(nodes, {
    Data: new UnixFS({
      type: 'directory',
      mode: shape.folderMode ?? 0o755,
      mtime: { secs: BigInt(shape.folderSecs ?? 1_700_000_000) },
    }).marshal(),
    Links: [{ Name: 'latest', Hash: link, Tsize: 0 }],
  });
  const root = await putNode(nodes, {
    Data: new UnixFS({ type: 'directory' }).marshal(),
    Links: [{ Name: 'docs', Hash: docs, Tsize: 0 }],
  });
  return { manifest: { root, source_label: 'laptop:/home/ann/Documents' }, nodes };
}

async function changeAt(path: string, older: Shape, newer: Shape) {
  return itemChange(itemLookAt(await version(older), path), itemLookAt(await version(newer), path));
}

describe('one path in two versions', () => {
  it('tells a link by its target, and its time only to the microsecond a restore sets', async () => {
    const base = { linkTarget: 'report-v1.txt' };
    expect(await changeAt('docs/latest', base, base)).toBeUndefined();
    expect(await changeAt('docs/latest', base, { linkTarget: 'report-v2.txt' })).toBe('modified');
    expect(
      await changeAt('docs/latest', base, { ...base, linkTime: [1_700_000_000, 400] }),
    ).toBeUndefined();
    expect(await changeAt('docs/latest', base, { ...base, linkTime: [1_700_000_000, 2_000] })).toBe(
      'metadata',
    );
  });

  it('tells a folder by what it holds, and by its mode, not by its own time', async () => {
    const base = { linkTarget: 'report-v1.txt' };
    expect(await changeAt('docs', base, { ...base, folderSecs: 1_800_000_000 })).toBeUndefined();
    expect(await changeAt('docs', base, { ...base, folderMode: 0o700 })).toBe('metadata');
    expect(await changeAt('docs', base, { linkTarget: 'report-v2.txt' })).toBe('modified');
  });

  it('finds an item by the path it had on disk, and nothing above the top', async () => {
    const tree = await version({ linkTarget: 'report-v1.txt' });
    expect(itemLookAt(tree, '/home/ann/Documents/docs/latest')?.entry).toMatchObject({
      name: 'latest',
      type: 'symlink',
      target: 'report-v1.txt',
    });
    expect(itemLookAt(tree, 'docs/missing')).toBeUndefined();
    expect(itemLookAt(tree, '../../etc')).toBeUndefined();
    expect(itemChange(undefined, itemLookAt(tree, 'docs'))).toBe('added');
    expect(itemChange(itemLookAt(tree, 'docs'), undefined)).toBe('removed');
    expect(itemChange(itemLookAt(tree, 'docs'), itemLookAt(tree, 'docs/latest'))).toBe('type');
  });
});
