import type { CID } from 'multiformats/cid';
import { EngineError } from '../api/index.ts';
import { cidAt, shapeOfNode, type NodeLookup } from './walk-tree.ts';

/**
 * That the version whose tree is `root` holds nothing at `subPath` (whose names are `parts`),
 * and where to look instead: the deepest folder on the way to it that the version holds, or its
 * top. The folder just above would do for a name mistyped at the end, but one mistyped nearer
 * the start sent the user to a folder that is not there either.
 */
export function notInVersion(
  subPath: string,
  parts: readonly string[],
  root: CID,
  nodes: NodeLookup,
): EngineError {
  let held = parts.length - 1;
  for (; held > 0; held -= 1) {
    const cid = cidAt(root, parts.slice(0, held), nodes);
    if (cid && shapeOfNode(cid, nodes).kind === 'directory') break;
  }
  const above = parts.slice(0, Math.max(held, 0)).join('/');
  return new EngineError(
    'not_found',
    `no ${subPath} in this version (canopy ls ${above === '' ? 'without a path' : JSON.stringify(above)} shows what is there, canopy history the versions that hold it)`,
  );
}
