/**
 * Some of the files compactEach chose could not be compacted; each is in its `skip` from now
 * on, and the others were compacted.
 */
export class CompactionFailed extends Error {
  override readonly name = 'CompactionFailed';
}

/**
 * Compacts each of `ids` in turn (packs, or files of metadata chunks), leaving out those in
 * `skip`, at most `max` of them; returns how many were. One that cannot be (a damaged file) is
 * added to `skip`, so it does not stand in front of the others for ever, and the rest go on;
 * then the call rejects naming each failure, for the log.
 */
export async function compactEach(
  candidates: readonly string[],
  max: number,
  skip: Set<string>,
  compact: (id: string) => Promise<void>,
  what: string,
): Promise<number> {
  const chosen = candidates.filter((id) => !skip.has(id)).slice(0, max);
  const failures: Array<{ id: string; error: unknown }> = [];
  for (const id of chosen) {
    try {
      await compact(id);
    } catch (error) {
      skip.add(id);
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
