/**
 * What Canopy's state database lost when it was found damaged and rebuilt from what was intact
 * in it: a host tells the user, once, what that means for them.
 */
export type StateLoss =
  /** The enrolment and the buckets known: the device logs in again. */
  | 'account'
  /** What each file was last time: the next backup of each folder reads every file again. */
  | 'file_index'
  /** An upload under way: what it had not sent yet is read and sent again by the next backup. */
  | 'upload_queue'
  /** The exclude rules kept with `canopy excludes`. */
  | 'source_excludes'
  /** The retention policies set with `canopy versions policy`: backups remove no version. */
  | 'retention_policies';

/** A rebuild of the state database (main/state/state-repair.ts). */
export interface StateRepair {
  /** The damaged database, kept beside the new one as it was found. */
  readonly setAsideAs: string;
  /** What could not be read from it, in the order of StateLoss; caches are not named. */
  readonly lost: readonly StateLoss[];
}
