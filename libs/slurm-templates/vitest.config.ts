import { defineConfig } from 'vitest/config';

// UPDATE_GOLDEN=1 rewrites the golden scripts in __golden__/ (same as `vitest -u`); otherwise a
// changed script fails with a line diff against its golden file.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    exclude: ['src/**/*.e2e.test.ts', '**/node_modules/**'],
    update: process.env.UPDATE_GOLDEN === '1',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
