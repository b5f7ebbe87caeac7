import { defineConfig } from 'vitest/config';

// Test tiers are separate projects so each can be run alone (`vitest run --project unit`).
export default defineConfig({
  test: {
    pool: 'forks',
    // One worker per core. Vitest's default is one fewer, which on this machine's two cores ran
    // every file one after another: the whole suite took 962 s with one worker and 589 s with
    // two. Much of a scenario's time is spent waiting on the child processes and servers it
    // starts, so a second file fits beside it.
    maxWorkers: '100%',
    projects: [
      {
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], testTimeout: 10_000 },
      },
      {
        test: {
          name: 'conformance',
          include: ['test/conformance/**/*.test.ts'],
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'scenarios',
          include: ['test/scenarios/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
