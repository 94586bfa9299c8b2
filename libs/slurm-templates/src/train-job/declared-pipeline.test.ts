import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { PipelineView } from '../inputs.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { tinyLightning } from '../fixtures.test-support.ts';
import { jobInput, makeSite, writeJob, type SandboxSite } from '../test-support/job-harness.ts';
import { makeSandbox, runBash, runBashSignalled, type Sandbox } from '../test-support/sandbox.ts';
import { renderTrainJob } from './render-train-job.ts';

// A job of a declared pipeline (not kdgat): its own command with {run_dir}, its override style,
// its code first on PYTHONPATH. The rendered script runs under bash; python is a stub recording argv.
let sb: Sandbox;
let site: SandboxSite;
beforeEach(() => {
  sb = makeSandbox();
  site = makeSite(sb);
});
afterEach(() => sb.cleanup());

const tiny = (overrideStyle: PipelineView['overrideStyle']): PipelineView => ({
  ...tinyLightning(),
  overrideStyle,
});

function tinyJob(overrideStyle: PipelineView['overrideStyle'], points?: Record<string, number>[]) {
  const base = jobInput(site);
  const code = join(sb.dir, 'their-code');
  mkdirSync(join(code, 'src'), { recursive: true });
  return jobInput(site, {
    pipeline: tiny(overrideStyle),
    stage: {
      ...base.stage,
      id: 'fit',
      stage: 'train',
      model: 'mlp',
      scale: 'small',
      dataset: 'hcrl_sa',
      overrides: { max_epochs: 2 },
    },
    environment: { ...site.env, code, codePaths: ['src'] },
    ...(points ? { sweepPoints: points, arrayTablePath: join(sb.dir, 'points.tsv') } : {}),
  });
}

const lastCall = (tool: string) => sb.calls(tool).at(-1);
const pythonPathOf = () => {
  const f = readdirSync(sb.log).find((n) => n.endsWith('.pythonpath'))!;
  return readFileSync(join(sb.log, f), 'utf8');
};

describe('a declared pipeline in a job script', () => {
  it("runs the declaration's command with {run_dir} filled, hydra-style overrides and its code first on PYTHONPATH", () => {
    const input = tinyJob('hydra', [{ lr: 0.5 }, { lr: 0.05 }]);
    const rendered = renderTrainJob(input);
    const script = writeJob(sb, input);
    expect(rendered.script).toContain("# The tiny-lightning pipeline's stage command (its declaration).");
    const r = runBash(script, [], {
      cwd: sb.dir,
      env: sb.env({ SLURM_JOB_ID: '77', SLURM_ARRAY_TASK_ID: '1' }),
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const runDir = join(input.runRoot, 'point_1', 'hcrl_sa', 'mlp_small_train');
    expect(lastCall('python')).toEqual([
      '-m',
      'tiny_lightning.cli',
      'train',
      '--model',
      'mlp',
      '--scale',
      'small',
      '--dataset',
      'hcrl_sa',
      '--output-dir',
      runDir,
      'max_epochs=2',
      'lr=0.05',
    ]);
    expect(pythonPathOf().split(':')[0]).toBe(join(sb.dir, 'their-code', 'src'));
    // The job record lands in the run dir the pipeline was given.
    expect(readFileSync(join(runDir, 'job_record.jsonl'), 'utf8')).toContain('"stage":"train"');
  });

  it('passes flags-style overrides as --key value', () => {
    const input = tinyJob('flags');
    const r = runBash(writeJob(sb, input), [], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '78' }) });
    expect(r.status).toBe(0);
    expect(lastCall('python')?.slice(-3)).toEqual([
      join(input.runRoot, 'hcrl_sa', 'mlp_small_train'),
      '--max_epochs',
      '2',
    ]);
  });

  it('stops with the field named when the code directory is missing on the node', () => {
    const input = tinyJob('hydra');
    const r = runBash(
      writeJob(sb, { ...input, environment: { ...input.environment, codePaths: ['lib'] } }),
      [],
      {
        cwd: sb.dir,
        env: sb.env({ SLURM_JOB_ID: '79' }),
      },
    );
    expect(r.status).toBe(69);
    expect(r.stderr).toContain(
      `kdgat-hpc: the pipeline's code ${join(sb.dir, 'their-code', 'lib')} is missing`,
    );
    expect(sb.calls('python').filter((c) => c[1] !== 'kdgat')).toEqual([]);
  });

  it('refuses a code path that leaves the code, before rendering', () => {
    const input = tinyJob('hydra');
    expect(() =>
      renderTrainJob({ ...input, environment: { ...input.environment, codePaths: ['../elsewhere'] } }),
    ).toThrow(TemplateInputError);
  });

  it("passes the signal to a pipeline that requeues itself only within the restart budget (Lightning's contract)", async () => {
    const input = {
      ...tinyJob('hydra'),
      requeue: {
        enabled: true,
        signal: 'USR1',
        leadSeconds: 60,
        maxRestarts: 2,
        contract: 'lightning' as const,
      },
    };
    const r = await runBashSignalled(writeJob(sb, input), {
      cwd: sb.dir,
      env: sb.env({
        STUB_PYTHON_MODE: 'lightning',
        STUB_PYTHON_WAIT_STEPS: '40',
        SLURM_JOB_ID: '80',
        SLURM_RESTART_COUNT: '2',
      }),
      readyFile: join(sb.log, 'python.started'),
      signal: 'SIGUSR1',
    });
    expect(r.stdout).toContain(
      'kdgat-hpc: SIGUSR1: restart 2 reached the maximum of 2: not passing it to the pipeline, which would requeue itself',
    );
    expect(existsSync(join(sb.log, 'python.signalled'))).toBe(false);
    expect(sb.calls('scontrol')).toEqual([]);
  });
});

describe("the job's environment (env of the pipeline, the stack and the stage; the raw-data variable)", () => {
  const envOfLastCall = (): Record<string, string> => {
    const f = readdirSync(sb.log)
      .filter((n) => /^python\.\d+\.env$/.test(n))
      .sort()
      .at(-1)!;
    return Object.fromEntries(
      readFileSync(join(sb.log, f), 'utf8')
        .split('\0')
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    );
  };

  it('exports each variable to the pipeline as written, quoted and never expanded', () => {
    const input = {
      ...tinyJob('hydra'),
      jobEnv: [
        ['CAN_DATA', '/fs/ess/PAS1266/can/hcrl_sa'],
        ['LITERAL', '~/x,%HOME:~'],
        ['WANDB_MODE', 'offline'],
      ] as const,
    };
    const rendered = renderTrainJob(input).script;
    expect(rendered).toMatch(/^export CAN_DATA='?\/fs\/ess\/PAS1266\/can\/hcrl_sa'?$/m);
    const r = runBash(writeJob(sb, input), [], {
      cwd: sb.dir,
      env: sb.env({ SLURM_JOB_ID: '80', CAN_DATA: '/login/value' }),
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(envOfLastCall()).toMatchObject({
      CAN_DATA: '/fs/ess/PAS1266/can/hcrl_sa',
      LITERAL: '~/x,%HOME:~',
      WANDB_MODE: 'offline',
    });
  });

  it('refuses a value with shell text before rendering, naming the variable', () => {
    expect(() => renderTrainJob({ ...tinyJob('hydra'), jobEnv: [['X', '$(id)']] })).toThrow(/env\.X/);
    expect(() => renderTrainJob({ ...tinyJob('hydra'), jobEnv: [['bad name', 'x']] })).toThrow(
      TemplateInputError,
    );
  });
});

describe('a swept stage after a stage that ran once (sweep.stages)', () => {
  it("links the once-run stage's dir into each point's root, so {run_root} paths reach it; refuses to replace a real dir", () => {
    const input = {
      ...tinyJob('hydra', [{ lr: 0.5 }, { lr: 0.05 }]),
      stage: {
        ...tinyJob('hydra').stage,
        args: ['--teacher-path', '{run_root}/hcrl_sa/mlp_large_train/last.ckpt'],
      },
      sharedRunDirs: ['hcrl_sa/mlp_large_train'],
    };
    const teacherDir = join(input.runRoot, 'hcrl_sa', 'mlp_large_train');
    mkdirSync(teacherDir, { recursive: true });
    const script = writeJob(sb, input);
    const r = runBash(script, [], {
      cwd: sb.dir,
      env: sb.env({ SLURM_JOB_ID: '81', SLURM_ARRAY_TASK_ID: '1' }),
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const point = join(input.runRoot, 'point_1');
    expect(readlinkSync(join(point, 'hcrl_sa', 'mlp_large_train'))).toBe(teacherDir);
    const argv = lastCall('python')!;
    expect(argv.slice(argv.indexOf('--teacher-path'), argv.indexOf('--teacher-path') + 2)).toEqual([
      '--teacher-path',
      join(point, 'hcrl_sa', 'mlp_large_train', 'last.ckpt'),
    ]);
    // A requeued task finds its link and keeps it; a real directory in its place is not replaced.
    expect(
      runBash(script, [], { cwd: sb.dir, env: sb.env({ SLURM_JOB_ID: '82', SLURM_ARRAY_TASK_ID: '1' }) })
        .status,
    ).toBe(0);
    mkdirSync(join(input.runRoot, 'point_0', 'hcrl_sa', 'mlp_large_train'), { recursive: true });
    const planted = runBash(script, [], {
      cwd: sb.dir,
      env: sb.env({ SLURM_JOB_ID: '83', SLURM_ARRAY_TASK_ID: '0' }),
    });
    expect(planted.status).toBe(64);
    expect(planted.stderr).toContain('exists and is not the link to');
  });
});
