// The app is wiring: its commands parse flags, call the libraries (the run's phases, following it
// and `runner shell` are @kdgat/runs) and print. A budget on its non-test lines keeps logic from
// growing back here; the lint's module boundaries (eslint.config.js) keep the arrows.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/** Lines of non-test TypeScript under apps/runner/src, counted as `wc -l` counts them. */
const BUDGET = 1500;
const SRC = import.meta.dirname;
const TEST_FILE = /\.(test|test-support)\.ts$/;

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (entry.name.endsWith('.ts') && !TEST_FILE.test(entry.name)) yield path;
  }
}

const lines = (file: string): number => (readFileSync(file, 'utf8').match(/\n/g) ?? []).length;

describe('the runner app', () => {
  it(`holds at most ${BUDGET} lines of non-test code`, () => {
    const files = [...sources(SRC)].map((f) => ({ file: relative(SRC, f), lines: lines(f) }));
    const total = files.reduce((n, f) => n + f.lines, 0);
    const largest = [...files]
      .sort((a, b) => b.lines - a.lines)
      .slice(0, 5)
      .map((f) => `${f.file} ${f.lines}`)
      .join(', ');
    expect(
      total,
      `apps/runner/src has ${total} lines of non-test code (largest: ${largest}); move logic into a library (libs/runs for the run's phases)`,
    ).toBeLessThanOrEqual(BUDGET);
  });
});
