import { EngineError } from '../api/index.ts';
import { sourcePlace } from '../protocol/index.ts';
import { isSameFolder } from '../scanner/index.ts';

// A bucket keeps the folder it was first backed up from (the active version's `source_label`,
// §17.3): a backup of another folder is refused unless it is told to replace that source. The
// backup and its dry run refuse alike, from this one rule.

/**
 * Whether two source labels (`host:/folder`, §17.3) name the same folder of the same computer
 * by two paths: one through a symbolic link, or the working folder's (same-folder.ts). This
 * computer's labels only, as only its folders can be resolved here.
 */
function namesSameFolder(a: string, b: string): boolean {
  const [placeA, placeB] = [sourcePlace(a), sourcePlace(b)];
  if (!placeA || !placeB || placeA.host !== placeB.host) return false;
  return isSameFolder(placeA.folder, placeB.folder);
}

/**
 * The refusal of a backup labelled `sourceLabel` into a bucket whose active version was backed
 * up from `activeLabel` (its manifest's, whatever type it has there); null when the backup may
 * go on: the same folder, a version of no label, or `replaceSource`.
 */
export function otherSourceRefusal(
  activeLabel: unknown,
  sourceLabel: string,
  replaceSource: boolean,
): EngineError | null {
  if (
    typeof activeLabel !== 'string' ||
    activeLabel === sourceLabel ||
    replaceSource ||
    namesSameFolder(activeLabel, sourceLabel)
  )
    return null;
  return new EngineError(
    'other_source',
    `this bucket holds backups of ${activeLabel}, not of ${sourceLabel}: choose another bucket, or add --replace-source to make this folder its source from now on (the versions of ${activeLabel} stay restorable)`,
  );
}
