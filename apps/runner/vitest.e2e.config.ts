import { defineConfig } from 'vitest/config';

// End-to-end tests: the real local SLURM (scripts/slurm-local.sh) and the local scheduler.
// One file at a time: they share one slurmctld and one node.
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.test.ts'],
    environment: 'node',
    fileParallelism: false,
    testTimeout: 240_000,
    hookTimeout: 180_000,
    globalSetup: ['test/e2e/global-setup.ts'],
  },
});
