// Any pipeline, not only kdgat: the job shell, the runner and the libraries it is built from name
// the default pipeline nowhere but in its declaration (libs/config/src/pipeline/). Elsewhere they
// read it from there, so a researcher's declared pipeline gets the same treatment. The tool's own
// names (the `@kdgat/` packages, `kdgat-hpc`, `kdgat-runner`) are not the pipeline's and are allowed.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '../../..');
const SCANNED = ['apps/runner/src', ...readdirSync(join(REPO, 'libs')).map((lib) => `libs/${lib}/src`)];
const DECLARATION = 'libs/config/src/pipeline/';
const SOURCE = /\.(ts|sh|py|json)$/;
const TEST_FILE = /\.(test|test-support)\.ts$|\/test-support\//;
const TOOL_NAMES = /@kdgat\/|kdgat-hpc|kdgat-runner/g;
const PIPELINE_NAME = /kdgat|kd_gat/i;

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(join(REPO, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) yield* sources(path);
    else if (SOURCE.test(entry.name)) yield path;
  }
}

/** `file:line: text` for every line that names the pipeline outside its declaration and tests. */
function pipelineLiterals(): string[] {
  const found: string[] = [];
  for (const dir of SCANNED) {
    for (const file of sources(dir)) {
      if (file.startsWith(DECLARATION) || TEST_FILE.test(file)) continue;
      readFileSync(join(REPO, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (PIPELINE_NAME.test(line.replace(TOOL_NAMES, ''))) found.push(`${file}:${i + 1}: ${line.trim()}`);
        });
    }
  }
  return found;
}

describe('the default pipeline is a declaration', () => {
  it('is named nowhere in the job shell, the runner or its libraries but in its declaration', () => {
    expect(pipelineLiterals()).toEqual([]);
  });

  it('the check sees a literal (the declaration itself names it)', () => {
    const declaration = [...sources(DECLARATION.slice(0, -1))].filter((f) => !TEST_FILE.test(f));
    const named = declaration.filter((f) => PIPELINE_NAME.test(readFileSync(join(REPO, f), 'utf8')));
    expect(named.length).toBeGreaterThan(0);
    expect(relative(REPO, join(REPO, DECLARATION))).toBe('libs/config/src/pipeline');
  });
});
