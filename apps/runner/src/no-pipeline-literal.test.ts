// Any pipeline, not only kdgat: the job shell, the runner and the libraries it is built from name
// the default pipeline nowhere but in its declaration (libs/config/src/pipeline/). Elsewhere they
// read it from there, so a researcher's declared pipeline gets the same treatment. The tool's own
// names (the `@kdgat/` packages, `kdgat-hpc`, `kdgat-runner`) are not the pipeline's and are allowed.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '../../..');
const SCANNED = [
  'apps/runner/src',
  'infra/components',
  'infra/providers',
  'infra/bin',
  ...readdirSync(join(REPO, 'libs')).map((lib) => `libs/${lib}/src`),
];
const SCANNED_FILES = ['infra/index.ts'];
const DECLARATION = 'libs/config/src/pipeline/';
const SOURCE = /\.(ts|sh|py|json)$/;
const TEST_FILE = /\.(test|test-support)\.ts$|\/test-support\//;
// The tool's own namespace: its packages and commands, its variables, its Pulumi type tokens and
// dynamic-provider module (renaming those would replace every resource of a provisioned stack), and
// the marker files and shell functions it leaves on a site.
const TOOL_NAMES =
  /@kdgat\/|kdgat-hpc|kdgat-runner|KDGAT_HPC_|kdgat:hpc:|^\s*'kdgat',$|\.?kdgat-(?:owner|tmp|modules|inherit|rattler)|kdgat_pulumi_\w+/g;
/**
 * Named on purpose: the OSC preset's project folders are the first user's site facts
 * (`/fs/ess/<project>/kd-gat`), where their data already lies.
 */
const ALLOWED = [/^libs\/config\/src\/cluster\/presets\.ts:\d+: \w+: `\/[a-z/]+\/\$\{project\}\/kd-gat[/`]/];
/** Every spelling: kdgat, KD-GAT, kd_gat, KD_GAT_DATA_ROOT, "KD GAT". */
const PIPELINE_NAME = /kd[-_ ]?gat/i;

/** Whether a line names the pipeline (the tool's own names taken out first). */
const namesPipeline = (line: string): boolean => PIPELINE_NAME.test(line.replace(TOOL_NAMES, ''));

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
  for (const file of [...SCANNED.flatMap((dir) => [...sources(dir)]), ...SCANNED_FILES]) {
    if (file.startsWith(DECLARATION) || TEST_FILE.test(file)) continue;
    readFileSync(join(REPO, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const at = `${file}:${i + 1}: ${line.trim()}`;
        if (namesPipeline(line) && !ALLOWED.some((a) => a.test(at))) found.push(at);
      });
  }
  return found;
}

describe('the default pipeline is a declaration', () => {
  it('is named nowhere in the job shell, the runner or its libraries but in its declaration', () => {
    expect(pipelineLiterals()).toEqual([]);
  });

  it("catches every spelling of a planted literal, and lets the tool's own names through", () => {
    for (const planted of [
      "const root = process.env['KD_GAT_DATA_ROOT'];",
      '# runs python -m kdgat',
      'see the KD-GAT paper',
      'kd_gat.pipeline',
      'Kd Gat',
    ])
      expect(namesPipeline(planted), planted).toBe(true);
    for (const own of [
      "import { x } from '@kdgat/config';",
      'kdgat-hpc.yaml',
      'kdgat-runner init',
      '$KDGAT_HPC_WORKSPACE',
    ])
      expect(namesPipeline(own), own).toBe(false);
  });

  it('the check sees a literal (the declaration itself names it)', () => {
    const declaration = [...sources(DECLARATION.slice(0, -1))].filter((f) => !TEST_FILE.test(f));
    const named = declaration.filter((f) => PIPELINE_NAME.test(readFileSync(join(REPO, f), 'utf8')));
    expect(named.length).toBeGreaterThan(0);
    expect(relative(REPO, join(REPO, DECLARATION))).toBe('libs/config/src/pipeline');
  });
});
