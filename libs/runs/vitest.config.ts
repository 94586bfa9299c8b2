import { defineConfig } from 'vitest/config';

// Unit tests beside the code; nothing is submitted to a scheduler. No module state is shared between
// files, so one worker runs them all (isolate: false saves a worker start per file).
export default defineConfig({ test: { include: ['src/**/*.test.ts'], environment: 'node', isolate: false } });
