import { describe, expect, it } from 'vitest';
import { siteFromStackConfig } from '../site/stack-config.ts';
import { JobEnvSchema, jobEnvironment } from './job-env.ts';
import { DEFAULT_PIPELINE_DECLARATION } from './pipeline.ts';

const repo = '/repo';
const kdgatRaw = { variable: 'KD_GAT_DATA_ROOT', points: 'root' } as const;

describe("a job's environment: pipeline, stack and stage env, and the raw-data variable", () => {
  it('layers pipeline < stack < stage, then exports the raw-data root from the stack', () => {
    const env = jobEnvironment({
      dataset: 'hcrl_sa',
      pipeline: { OMP_NUM_THREADS: '4', HF_HOME: '/pipeline/hf' },
      stack: { HF_HOME: '/fs/scratch/PAS1266/hf', WANDB_MODE: 'offline' },
      stage: { WANDB_MODE: 'disabled' },
      rawData: kdgatRaw,
      rawDir: '/fs/ess/PAS1266/can/hcrl_sa',
    });
    expect(env).toEqual([
      ['OMP_NUM_THREADS', '4'],
      ['HF_HOME', '/fs/scratch/PAS1266/hf'],
      ['WANDB_MODE', 'disabled'],
      ['KD_GAT_DATA_ROOT', '/fs/ess/PAS1266/can'],
    ]);
  });

  it("gives a pipeline that reads the data set's own directory that directory", () => {
    expect(
      jobEnvironment({
        dataset: 'teacher_set',
        rawData: { variable: 'CAN_DATA', points: 'dataset' },
        rawDir: '/fs/ess/x/recordings-2024/',
      }),
    ).toEqual([['CAN_DATA', '/fs/ess/x/recordings-2024']]);
  });

  it('sets no raw-data variable where the stack declares no raw directory (the login value is inherited)', () => {
    expect(jobEnvironment({ dataset: 'synth', rawData: kdgatRaw })).toEqual([]);
  });

  it('refuses a raw directory a root-reading pipeline cannot reach, naming the data set, the value and the fix', () => {
    expect(() =>
      jobEnvironment({ dataset: 'hcrl_sa', rawData: kdgatRaw, rawDir: '/fs/ess/can/HCRL-SA' }),
    ).toThrow(
      /raw directory of data set hcrl_sa = "\/fs\/ess\/can\/HCRL-SA": expected a directory named hcrl_sa: the pipeline reads \$KD_GAT_DATA_ROOT\/hcrl_sa/,
    );
  });

  it('refuses an env entry for the raw-data variable, the cache root, or a name the job owns', () => {
    expect(() =>
      jobEnvironment({ dataset: 'd', stack: { KD_GAT_DATA_ROOT: '/x' }, rawData: kdgatRaw }),
    ).toThrow(
      /stack env\.KD_GAT_DATA_ROOT = "\/x": expected no value: KD_GAT_DATA_ROOT is the pipeline's raw-data variable/,
    );
    expect(() =>
      jobEnvironment({ dataset: 'd', stage: { KD_GAT_CACHE_ROOT: '/x' }, owned: ['KD_GAT_CACHE_ROOT'] }),
    ).toThrow(
      /stage env\.KD_GAT_CACHE_ROOT = "\/x": expected no value: the job script exports KD_GAT_CACHE_ROOT itself/,
    );
    expect(() => jobEnvironment({ dataset: 'd', pipeline: { PYTHONPATH: '/x' } })).toThrow(
      /pipeline env\.PYTHONPATH/,
    );
  });

  it('the schema names the variable and what was expected: names, one-line values, reserved names', () => {
    const issues = (v: unknown) => {
      const r = JobEnvSchema.safeParse(v);
      return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    };
    expect(issues({ GOOD_NAME: 'https://mlflow.example:5000/x,y:z@host' })).toEqual([]);
    expect(issues({ 'bad-name': 'x' }).join()).toMatch(/bad-name: expected an environment variable name/);
    for (const bad of ['two\nlines', '$(id)', 'a b', '-rf', '', '`id`'])
      expect(issues({ A: bad }), JSON.stringify(bad)).toEqual([
        'A: a value of letters, digits and _ . / : @ % + = , ~ - (not starting with -; no spaces or shell characters), at most 4096 characters',
      ]);
    expect(issues({ SLURM_CPUS_PER_TASK: '4' }).join()).toMatch(
      /SLURM_CPUS_PER_TASK: SLURM_CPUS_PER_TASK cannot be set here: SLURM_\* variables belong/,
    );
  });
});

describe('the stack declares raw data and env', () => {
  const base = { cluster: 'local', environment: 'cpu-local' };
  it('rawDataRoot gives each data set <root>/<name>; datasets[].raw names one elsewhere', () => {
    const site = siteFromStackConfig(
      {
        ...base,
        rawDataRoot: '/fs/ess/can',
        datasets: ['a', { name: 'b', raw: '/fs/project/b-recordings' }],
      },
      repo,
    );
    expect(site.datasets).toEqual(['a', 'b']);
    expect(site.rawData).toEqual({ a: '/fs/ess/can/a', b: '/fs/project/b-recordings' });
    expect(siteFromStackConfig({ ...base, datasets: ['a'] }, repo).rawData).toEqual({});
  });

  it('a relative rawDataRoot (the local stack) is taken from the repository', () => {
    expect(
      siteFromStackConfig({ ...base, rawDataRoot: '.hpc/data/raw', datasets: ['s'] }, repo).rawData,
    ).toEqual({
      s: '/repo/.hpc/data/raw/s',
    });
  });

  it('refuses a bad raw path, an unknown dataset key and a reserved env name, naming the key', () => {
    expect(() => siteFromStackConfig({ ...base, rawDataRoot: '/fs/ess/$(whoami)' }, repo)).toThrow(
      /stack config rawDataRoot = "\/fs\/ess\/\$\(whoami\)": expected a path of letters/,
    );
    expect(() => siteFromStackConfig({ ...base, datasets: [{ name: 'a', path: '/x' }] }, repo)).toThrow(
      /stack config datasets\[0\]\.path = "\/x": expected only name and raw/,
    );
    expect(() => siteFromStackConfig({ ...base, env: { HOME: '/x' } }, repo)).toThrow(
      /stack config env is not valid: env\.HOME: HOME cannot be set here/,
    );
    expect(siteFromStackConfig({ ...base, env: { HF_HOME: '/fs/scratch/hf' } }, repo).env).toEqual({
      HF_HOME: '/fs/scratch/hf',
    });
  });
});

describe("the default pipeline's raw-data variable", () => {
  it('is KD_GAT_DATA_ROOT, read as <root>/<dataset>', () => {
    expect(DEFAULT_PIPELINE_DECLARATION.rawData).toEqual(kdgatRaw);
  });
});
