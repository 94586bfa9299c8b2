import { defineConfig } from 'vitest/config';

// The cluster-shape e2e suite: the multi-node box of scripts/site/site.sh (three nodes, accounting,
// cgroups) reached over SSH, the runner driving it from the laptop. One file, one box.
export default defineConfig({
  test: {
    include: ['test/cluster/**/*.test.ts'],
    environment: 'node',
    fileParallelism: false,
    // Backstops behind the tests' own deadlines, which fire first and say what they waited for.
    testTimeout: 900_000,
    hookTimeout: 600_000,
  },
});
