// One entry of a restore that is left out while the rest goes on: the target's file system would
// not take it (refused-entry.ts), or the server could not give all of its bytes back. Listed in
// the restore's `notRestored` with `reason`, which is written for the user.

export class EntryNotRestoredError extends Error {
  constructor(
    readonly reason: string,
    options?: { cause: unknown },
  ) {
    super(reason, options);
    this.name = 'EntryNotRestoredError';
  }
}
