import { defineConfig } from 'vitest/config';

// End-to-end: the real Pulumi CLI on a temporary file backend, a real sshd on loopback,
// real venv/rattler environments. Files run one after another (they share the machine's 2 cores).
export default defineConfig({
  test: {
    include: ['test/e2e/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    fileParallelism: false,
  },
});
