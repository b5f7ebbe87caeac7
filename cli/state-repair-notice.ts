import type { StateLoss, StateRepair } from '../main/api/index.ts';

// What the user is told, once, when opening Canopy rebuilt its damaged state database: where
// the damaged one is kept, and what each part lost means for them.

const MEANING: Record<StateLoss, string> = {
  account:
    "this device's login could not be read from it: log in again (`canopy login`); the backups themselves are untouched",
  file_index:
    'the record of the files backed up could not be read from it: the next backup of each folder reads every file again, and sends only what its bucket lacks',
  upload_queue:
    'an unfinished upload could not be read from it: the next backup reads and sends what it had not sent',
  source_excludes:
    'the exclude rules kept with `canopy excludes` could not be read from it: add them again',
  retention_policies:
    'the retention policies set with `canopy versions policy` could not be read from it: backups remove no version until they are set again',
};

/** The lines to print for `repair`, each for stderr. */
export function stateRepairNotice(repair: StateRepair): string[] {
  return [
    `Canopy's state database was damaged: it is kept as ${repair.setAsideAs}, and a new one was made from what was intact in it`,
    ...repair.lost.map((loss) => MEANING[loss]),
  ];
}
