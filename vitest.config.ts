import { defineConfig } from 'vitest/config';

// Test tiers are separate projects so each can be run alone (`vitest run --project unit`).
export default defineConfig({
  test: {
    pool: 'forks',
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
