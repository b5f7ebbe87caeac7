// The mtime a restore gives an entry, and telling it on disk. A version keeps an entry's time to
// the nanosecond; Node sets a file's time only to the microsecond (main/restore/file-time.ts),
// so a restored entry's time is the microsecond nearest the version's. A backup of it must not
// take that for a change (main/packer/pack-source.ts), nor a comparison of versions
// (main/restore/version-diff.ts).

const NS_PER_US = 1000n;

/** `a` divided by `b`, rounded down (BigInt division rounds toward zero). */
export function dividedRoundingDown(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n ? q - 1n : q;
}

/**
 * The time a restore gives an entry backed up with `nanoseconds`: the microsecond nearest it (a
 * half rounds to the later), in microseconds.
 */
export function restoredMicroseconds(nanoseconds: bigint): bigint {
  return dividedRoundingDown(nanoseconds + NS_PER_US / 2n, NS_PER_US);
}

/**
 * Whether an entry whose mtime on disk is `onDiskNs` has the time a restore gives one backed up
 * with `inVersionNs`, which a restore could not set: differing from it below the microsecond.
 */
export function isRestoredTimeOf(onDiskNs: bigint, inVersionNs: bigint): boolean {
  return (
    onDiskNs !== inVersionNs &&
    onDiskNs % NS_PER_US === 0n &&
    restoredMicroseconds(inVersionNs) * NS_PER_US === onDiskNs
  );
}
