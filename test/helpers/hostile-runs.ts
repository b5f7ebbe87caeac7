// How many made-up hostile inputs (nodes, CARs) each property test of a hand-written reader
// tries, and from which seed: the same every run, unless HOSTILE_SEED=N HOSTILE_RUNS=N ask for
// others (a failure prints its seed and the smallest input that fails).

export const HOSTILE_INPUT_RUNS = {
  seed: Number(process.env['HOSTILE_SEED'] ?? 20261203),
  numRuns: Number(process.env['HOSTILE_RUNS'] ?? 20_000),
};
