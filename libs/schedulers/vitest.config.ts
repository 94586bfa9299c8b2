import { defineConfig } from 'vitest/config';

// Unit tests beside the code; nothing is submitted to a scheduler.
export default defineConfig({ test: { include: ['src/**/*.test.ts'], environment: 'node' } });
