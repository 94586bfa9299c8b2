import { defineConfig } from 'vitest/config';

// Unit tests: fast, no Pulumi CLI. The e2e suite has its own config (vitest.e2e.config.ts).
export default defineConfig({
  test: {
    include: ['test/*.test.ts'],
    testTimeout: 30_000,
  },
});
