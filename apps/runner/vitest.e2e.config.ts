import { defineConfig } from 'vitest/config';

// End-to-end tests: the real local SLURM (scripts/slurm-local.sh) and the local scheduler.
// One file at a time: they share one slurmctld and one node.
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.test.ts'],
    environment: 'node',
    fileParallelism: false,
    // The backstop behind the tests' own deadlines (helpers.ts WAIT_MS for a wait, harness.ts
    // CLI_TIMEOUT_MS for a runner call), which fire first and say what they waited for: generous,
    // because a deadline is not a performance check and CI machines are slower than this one.
    testTimeout: 600_000,
    hookTimeout: 180_000,
    globalSetup: ['test/e2e/global-setup.ts'],
  },
});
