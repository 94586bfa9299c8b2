import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sitePackages } from '../environment/gpu-layers.ts';
import { EnvironmentSpecSchema } from '../environment/schema.ts';
import { SpecValidationError } from '../errors.ts';
import { loadExperimentSpec, loadPipeline } from '../load/load.ts';
import { DEFAULT_PIPELINE_DECLARATION, overrideWords, stageCommand } from './pipeline.ts';

// A pipeline is declared: the repository's example declaration of tiny-lightning (a project that
// knows nothing of kdgat-hpc), and declarations made here with one mistake each.
const REPO = new URL('../../../../', import.meta.url).pathname;
const EXAMPLES = join(REPO, 'examples', 'pipelines');
const TINY = join(EXAMPLES, 'tiny-lightning.pipeline.yaml');

const dir = mkdtempSync(join(tmpdir(), 'kdgat-pipeline-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const STAGE = '{ id: fit, stage: train, model: mlp, scale: small, dataset: toy }';
const spec = (pipeline: string, stage = STAGE, extra = '') =>
  [
    'name: tiny',
    'cluster: local',
    'environment: cpu-local',
    `pipeline: ${pipeline}`,
    'stages:',
    `  - ${stage}`,
    extra,
  ].join('\n');
const load = (text: string) => loadExperimentSpec({ text, file: join(EXAMPLES, 'spec.yaml') });
const issuesOf = (text: string): string[] => {
  try {
    load(text);
  } catch (e) {
    if (e instanceof SpecValidationError) return e.issues.map((i) => `${i.path}: ${i.message}`);
    throw e;
  }
  throw new Error('expected the spec to be refused');
};
/** A declaration file in the temp dir: tiny-lightning's, with `change` applied to its text. */
const declaration = (name: string, change: (text: string) => string): string => {
  const text = change(readFileSync(TINY, 'utf8')).replace(
    /code: \{ path: tiny-lightning/,
    `code: { path: ${join(EXAMPLES, 'tiny-lightning')}`,
  );
  const file = join(dir, `${name}.pipeline.yaml`);
  writeFileSync(
    file,
    text.replace('file: tiny-lightning.schema.json', `file: ${join(EXAMPLES, 'tiny-lightning.schema.json')}`),
  );
  return file;
};

describe('a declared pipeline', () => {
  it('resolves with its code, schema, override style and requeue contract', () => {
    const { resolved, warnings } = load(
      spec(
        './tiny-lightning.pipeline.yaml',
        STAGE.replace(' }', ', overrides: { max_epochs: 2, lr: 0.01 } }'),
      ),
    );
    const p = resolved.pipeline;
    expect(p.name).toBe('tiny-lightning');
    expect(p.codeDir).toBe(join(EXAMPLES, 'tiny-lightning'));
    expect(p.codePaths).toEqual(['src']);
    expect(p.overrides).toBe('hydra');
    expect(p.requeue).toBe('lightning');
    expect(p.configSchema).toBeDefined();
    expect(resolved.stages[0]).toMatchObject({
      stage: 'train',
      model: 'mlp',
      overrides: { max_epochs: 2, lr: 0.01 },
    });
    expect(warnings.join('\n')).not.toMatch(/not checked/);
  });

  it('checks stage, model, scale and overrides against the declaration and its schema, all at once', () => {
    const issues = issuesOf(
      spec(
        './tiny-lightning.pipeline.yaml',
        '{ id: fit, stage: fit, model: gat, scale: small, dataset: toy, overrides: { lr: -1, colour: 3 } }',
      ),
    );
    expect(issues).toEqual([
      "stages[0].stage: stage fit is not one of pipeline tiny-lightning's",
      "stages[0].model: model gat is not one of pipeline tiny-lightning's",
      'stages[0].overrides.lr: lr = -1 is not valid for the pipeline',
      'stages[0].overrides.colour: unknown pipeline config key `colour`',
    ]);
  });

  it('passes overrides through, and says so, when the pipeline publishes no schema', () => {
    const file = declaration('no-schema', (t) => t.replace(/^schema: .*$/m, ''));
    const { resolved, warnings } = load(spec(file, STAGE.replace(' }', ', overrides: { anything: 1 } }')));
    expect(resolved.pipeline.configSchema).toBeUndefined();
    expect(warnings).toContain(
      'overrides not checked: pipeline tiny-lightning publishes no config schema (schema.file or schema.command in its declaration), so they are passed to it as written',
    );
  });

  it('refuses a tune study, and a requeue signal Lightning does not listen on', () => {
    const tune = issuesOf(
      spec(
        './tiny-lightning.pipeline.yaml',
        undefined,
        'requeue: { signal: USR2 }\ntune: { stage: fit, objective: { metric: val_loss, direction: minimize }, nTrials: 2, nWorkers: 1, space: { lr: { type: float, low: 0.001, high: 0.1, log: true } } }',
      ),
    );
    expect(tune, tune.join('\n')).toContain(
      "requeue.signal: pipeline tiny-lightning requeues itself the Lightning way, on SIGUSR1 (SLURMEnvironment's requeue_signal)",
    );
    expect(tune).toContain(
      "tune: a tune study runs kdgat's Optuna workers: pipeline tiny-lightning has none",
    );
  });

  it.each([
    [
      'an unknown placeholder',
      (t: string) => t.replace("'{run_dir}'", "'{run-dir}'"),
      /\{run-dir\} is not a placeholder/,
    ],
    [
      'the built-in name',
      (t: string) => t.replace('name: tiny-lightning', 'name: kdgat'),
      /declares the name kdgat/,
    ],
    [
      'a missing code dir',
      (t: string) => t.replace(/code: \{ path: [^,]+,/, 'code: { path: nowhere,'),
      /code.path nowhere is not a directory/,
    ],
    [
      'a code path out of the code',
      (t: string) => t.replace('pythonPath: [src]', 'pythonPath: [../src]'),
      /code\.pythonPath\[0\]: "\.\.\/src" is not valid/,
    ],
    [
      'an unknown requeue contract',
      (t: string) => t.replace('requeue: lightning', 'requeue: sometimes'),
      /requeue/,
    ],
    [
      'a missing schema file',
      (t: string) => t.replace('file: tiny-lightning.schema.json', 'file: missing.json'),
      /could not be read as a JSON Schema/,
    ],
  ])('refuses %s, naming it', (_what, change, message) => {
    const file = declaration(`bad-${_what.replace(/\W+/g, '-')}`, change);
    expect(issuesOf(spec(file)).join('\n')).toMatch(message);
  });

  it('takes its code from a git repository at a full commit, named in the declaration', () => {
    const commit = 'a'.repeat(40);
    const git = declaration('git', (t) =>
      t.replace(
        /code: \{ path: [^,]+,/,
        `code: { git: { url: https://example.org/theirs.git, commit: ${commit} },`,
      ),
    );
    expect(load(spec(git)).resolved.pipeline).toMatchObject({
      codeGit: { url: 'https://example.org/theirs.git', commit },
      codePaths: ['src'],
    });
    expect(load(spec(git)).resolved.pipeline.codeDir).toBeUndefined(); // the runner clones it
    const short = declaration('git-short', (t) =>
      t.replace(/code: \{ path: [^,]+,/, 'code: { git: { url: x, commit: abc123 },'),
    );
    expect(issuesOf(spec(short)).join('\n')).toMatch(
      /code\.git\.commit: "abc123" is not valid/,
    );
    const both = declaration('git-both', (t) =>
      t.replace('code: { path:', `code: { git: { url: x, commit: ${commit} }, path:`),
    );
    expect(issuesOf(spec(both)).join('\n')).toMatch(/either path or git, not both/);
  });

  it("keeps its schema file equal to what the project's own `schema` command prints", () => {
    // The command imports nothing but the standard library: any Python 3.11+ runs it.
    const printed = execFileSync('python3', ['-m', 'tiny_lightning.cli', 'schema'], {
      cwd: EXAMPLES,
      env: { ...process.env, PYTHONPATH: join(EXAMPLES, 'tiny-lightning', 'src') },
      encoding: 'utf8',
    });
    expect(JSON.parse(printed)).toEqual(loadPipeline(TINY).configSchema);
  });

  it('reads its schema from the command it declares, and checks overrides against it', () => {
    const file = declaration('schema-command', (t) =>
      t.replace(/^schema: .*$/m, 'schema: { command: [python3, -m, tiny_lightning.cli, schema] }'),
    );
    expect(loadPipeline(file).configSchema).toEqual(loadPipeline(TINY).configSchema);
    const issues = issuesOf(spec(file, STAGE.replace(' }', ', overrides: { lr: -1 } }')));
    expect(issues).toEqual(['stages[0].overrides.lr: lr = -1 is not valid for the pipeline']);
  });

  it('refuses a schema command that fails or prints no schema, with what it said', () => {
    const failing = declaration('schema-fails', (t) =>
      t.replace(/^schema: .*$/m, 'schema: { command: [python3, -m, tiny_lightning.cli, nonsense] }'),
    );
    expect(issuesOf(spec(failing)).join('\n')).toMatch(
      /pipeline: pipeline tiny-lightning: schema\.command \(run in .*tiny-lightning\) exited with 2: .*invalid choice/,
    );
    const silent = declaration('schema-silent', (t) =>
      t.replace(/^schema: .*$/m, "schema: { command: [python3, -c, 'print(42)'] }"),
    );
    expect(issuesOf(spec(silent)).join('\n')).toMatch(/schema\.command .* printed no JSON Schema \(not a JSON object\)/);
    const missing = declaration('schema-missing', (t) =>
      t.replace(/^schema: .*$/m, 'schema: { command: [no-such-program-here] }'),
    );
    expect(issuesOf(spec(missing)).join('\n')).toMatch(/schema\.command .* could not run: spawnSync no-such-program-here ENOENT/);
  });

  it("provisions its environment from the project's own uv.lock (pipelineLock)", () => {
    const env = EnvironmentSpecSchema.parse({
      name: 'tiny-lightning',
      backend: 'venv',
      python: '3.11',
      pipelinePins: true,
      pipelineLock: { file: 'examples/pipelines/tiny-lightning/uv.lock', project: 'tiny-lightning' },
    });
    const pins = new Map(sitePackages(env).map((p) => [p.name, p.version]));
    expect(pins.get('torch')).toBe('2.9.1');
    expect(pins.get('lightning')).toBe('2.6.6');
    expect(pins.has('pyarrow')).toBe(false); // kdgat's, not this project's
    expect(pins.has('tiny-lightning')).toBe(false); // the project itself travels as code
  });
});

describe('kdgat, the default declaration', () => {
  it('is the command the job scripts ran before declarations existed', () => {
    const stage = { stage: 'autoencoder', model: 'vgae', scale: 'large', dataset: 'hcrl_sa' };
    expect(stageCommand(DEFAULT_PIPELINE_DECLARATION, stage)).toEqual([
      'python',
      '-m',
      'kdgat',
      'autoencoder',
      '--model',
      'vgae',
      '--scale',
      'large',
      '--dataset',
      'hcrl_sa',
      '--run-root',
      '{run_root}',
    ]);
    expect(
      load(spec('kdgat', '{ id: ae, stage: autoencoder, model: vgae, scale: small, dataset: synth }'))
        .resolved.pipeline.name,
    ).toBe('kdgat');
  });

  it.each([
    ['dash-O', ['-O', 'training.lr', '0.1']],
    ['hydra', ['training.lr=0.1']],
    ['flags', ['--training.lr', '0.1']],
  ] as const)('passes an override %s-style', (style, words) => {
    expect(overrideWords(style, 'training.lr', '0.1')).toEqual(words);
  });
});
