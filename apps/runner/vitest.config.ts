import { defineConfig } from 'vitest/config';

// Unit tests: pure logic beside the code, nothing spawned.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
