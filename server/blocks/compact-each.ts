/**
 * Some of the files compactEach chose could not be compacted; each is in its `skip` from now
 * on, and the others were compacted.
 */
export class CompactionFailed extends Error {
  override readonly name = 'CompactionFailed';
}

/** A file compaction may rewrite: a pack, or a file of metadata chunks. */
export interface CompactionCandidate {
  readonly id: string;
  /** The bytes of it still named; they change when a block or chunk of it goes or moves. */
  readonly liveBytes: number;
}

/**
 * The files compaction failed on (a damaged file), each with its live bytes then. One is passed
 * over until those change: a client sent its damaged block again, which then lies elsewhere, or
 * a block of it went. Then the file holds other blocks than the ones it failed on, and is tried
 * again; one that stays as it was stays passed over until the server starts again.
 */
export type PassedOver = Map<string, number>;

/**
 * Compacts each of `candidates` in turn (packs, or files of metadata chunks), leaving out those
 * in `skip` (PassedOver), at most `max` of them; returns how many were. One that cannot be (a
 * damaged file) is added to `skip`, so it does not stand in front of the others for ever, and the
 * rest go on; then the call rejects naming each failure, for the log.
 */
export async function compactEach(
  candidates: readonly CompactionCandidate[],
  max: number,
  skip: PassedOver,
  compact: (id: string) => Promise<void>,
  what: string,
): Promise<number> {
  const chosen = candidates
    .filter((candidate) => skip.get(candidate.id) !== candidate.liveBytes)
    .slice(0, max);
  const failures: Array<{ id: string; error: unknown }> = [];
  for (const { id, liveBytes } of chosen) {
    try {
      await compact(id);
      skip.delete(id);
    } catch (error) {
      skip.set(id, liveBytes);
      failures.push({ id, error });
    }
  }
  if (failures.length > 0) {
    const detail = failures
      .map(({ id, error }) => `${id}: ${error instanceof Error ? error.message : String(error)}`)
      .join('; ');
    throw new CompactionFailed(
      `could not compact ${failures.length} ${what}, left as they are (${detail})`,
      { cause: failures[0]?.error },
    );
  }
  return chosen.length;
}
