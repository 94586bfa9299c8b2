import { defineConfig } from 'vitest/config';

// End-to-end against a running SLURM (scripts/slurm-local.sh up, or SLURM_CONF pointing at one).
export default defineConfig({
  test: {
    include: ['src/**/*.e2e.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 60_000,
  },
});
