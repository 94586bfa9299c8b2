import { defineConfig } from 'vitest/config';

// The laptop-to-cluster e2e suite: a site reachable only over SSH (scripts/site/site.sh), infra:up of
// its stack through Pulumi, and the runner driving it from the laptop. One file, one site.
export default defineConfig({
  test: {
    include: ['test/site/**/*.test.ts'],
    environment: 'node',
    fileParallelism: false,
    // Backstops behind the tests' own deadlines, which fire first and say what they waited for.
    testTimeout: 900_000,
    hookTimeout: 600_000,
  },
});
