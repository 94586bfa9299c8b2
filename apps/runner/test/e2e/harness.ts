// A throwaway "site" for end-to-end runs: a venv, the stand-in pipeline on PYTHONPATH, the site
// scripts rendered by @kdgat/slurm-templates (what infra installs), a scratch cache for the
// synthetic dataset, and a stack outputs file matching the spec's environment.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { environmentSpecHash, loadExperimentSpec } from '@kdgat/config';
import { renderEpilog, renderStageData } from '@kdgat/slurm-templates';
import type { StackOutputs } from '@kdgat/planning';

export const RUNNER = resolve(import.meta.dirname, '../..');
export const REPO = resolve(RUNNER, '../..');
const BIN = join(RUNNER, 'bin', 'kdgat-runner.js');
const STANDIN = join(RUNNER, 'test', 'fixtures', 'standin');

/** How long one `kdgat-runner` call may take before it is killed (a deadline, not a speed check). */
export const CLI_TIMEOUT_MS = 300_000;

export interface CliResult {
  code: number;
  out: string;
  err: string;
}

export interface Site {
  root: string;
  runsDir: string;
  stackFile: string;
  env: NodeJS.ProcessEnv;
  /** Writes a spec into the site and refreshes the stack outputs' environment hash for it. */
  spec(name: string, yaml: string): string;
  /** `--spec FILE --stack local --stack-outputs <the site's> --scheduler SCHEDULER`. */
  specArgs(spec: string, scheduler?: 'slurm' | 'local'): string[];
  /**
   * Runs `kdgat-runner ARGS` in the repository with the site's environment (or `opts.env`). A run
   * past `opts.timeoutMs` (default CLI_TIMEOUT_MS) is killed, and says so at the end of `err`.
   */
  cli(args: string[], opts?: { timeoutMs?: number; env?: NodeJS.ProcessEnv }): Promise<CliResult>;
}

/**
 * Runs argv and collects its output. A run past `timeoutMs` is killed (SIGTERM), and says so at the
 * end of `err` under `label`.
 */
export function runBounded(
  argv: string[],
  opts: { env: NodeJS.ProcessEnv; cwd: string; timeoutMs: number; label: string },
): Promise<CliResult> {
  return new Promise((res, rej) => {
    const child = spawn(argv[0]!, argv.slice(1), { env: opts.env, cwd: opts.cwd });
    let out = '';
    let err = '';
    let killed = false;
    child.stdout.on('data', (d) => (out += String(d)));
    child.stderr.on('data', (d) => (err += String(d)));
    const timer = setTimeout(() => {
      killed = true;
      child.kill('SIGTERM');
    }, opts.timeoutMs);
    child.on('error', rej);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (killed)
        err += `\n[e2e] ${opts.label}: still running after ${opts.timeoutMs / 1000} s; killed (SIGTERM)\n`;
      res({ code: code ?? 1, out, err });
    });
  });
}

/** The run directory `train` / `plan` print (`run dir: …`). */
export function runDirOf(out: string): string {
  const m = /^run dir: (.+)$/m.exec(out);
  if (!m) throw new Error(`no "run dir:" line in the output:\n${out}`);
  return m[1]!;
}

let venv: string | undefined;
function sharedVenv(): string {
  if (!venv) {
    venv = join(mkdtempSync(join(tmpdir(), 'runner-venv-')), 'venv');
    const r = spawnSync('python3', ['-m', 'venv', '--without-pip', venv], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`python3 -m venv failed: ${r.stderr}`);
  }
  return venv;
}

/** This checkout's Python environment (python/.venv): the stand-in runs in it where a test needs the real catalogue (pyarrow). */
export const PIPELINE_VENV = join(REPO, 'python', '.venv');

/**
 * A throwaway site. Its jobs' environment is a bare venv, or with `pipelineVenv` this checkout's
 * python/.venv, so that the stand-in's stages and the epilog write the catalogue's rows with the real
 * pipeline's code (which needs pyarrow).
 */
export function makeSite(opts: { pipelineVenv?: boolean } = {}): Site {
  const root = mkdtempSync(join(tmpdir(), 'runner-site-'));
  const runsDir = join(root, 'runs');
  const siteDir = join(root, 'site-scripts');
  const cacheDir = join(root, 'cache', 'synth');
  for (const d of [runsDir, siteDir, cacheDir, join(root, 'logs')]) mkdirSync(d, { recursive: true });
  writeFileSync(join(cacheDir, 'graphs.pt'), 'synthetic cache\n');
  const stageData = join(siteDir, 'stage_data.sh');
  const epilog = join(siteDir, 'job_epilog.sh');
  writeFileSync(stageData, renderStageData(), { mode: 0o755 });
  writeFileSync(epilog, renderEpilog({ name: 'local', clusterName: 'local' }), { mode: 0o755 });
  const prefix = opts.pipelineVenv ? PIPELINE_VENV : sharedVenv();
  const outputs: StackOutputs = {
    profile: 'local',
    environments: [
      {
        name: 'cpu-local',
        backend: 'venv',
        prefix,
        activate: `source ${prefix}/bin/activate`,
        specHash: '',
        lockPath: join(root, 'env.lock'),
        lockHash: 'e2e-lock-hash',
      },
    ],
    scratch: { root, cacheDirs: { synth: cacheDir }, runsDir, logsDir: join(root, 'logs') },
    scripts: {
      dir: siteDir,
      stageData,
      epilog,
      trainGpu: join(siteDir, 'train_gpu.sh'),
      preprocessGpu: join(siteDir, 'preprocess_gpu.sh'),
    },
  };
  const stackFile = join(root, 'stack-outputs.json');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PYTHONPATH: [STANDIN, process.env['PYTHONPATH']].filter(Boolean).join(':'),
    // Long enough that a job can be signalled or cancelled while it runs.
    HPC_STANDIN_EPOCH_SECONDS: '1',
  };
  const site: Site = {
    root,
    runsDir,
    stackFile,
    env,
    spec(name, yaml) {
      const file = join(root, `${name}.yaml`);
      writeFileSync(file, yaml);
      const { resolved } = loadExperimentSpec(file);
      // One environment per environment the spec uses, all the same venv.
      const template = outputs.environments[0]!;
      outputs.environments = Object.values(resolved.environments).map((e) => ({
        ...template,
        name: e.name,
        specHash: environmentSpecHash(e),
      }));
      writeFileSync(stackFile, JSON.stringify(outputs, null, 2));
      return file;
    },
    specArgs(spec, scheduler = 'slurm') {
      return ['--spec', spec, '--stack', 'local', '--stack-outputs', stackFile, '--scheduler', scheduler];
    },
    cli(args, { timeoutMs = CLI_TIMEOUT_MS, env: childEnv = env } = {}) {
      return runBounded([process.execPath, BIN, ...args], {
        env: childEnv,
        cwd: REPO,
        timeoutMs,
        label: `kdgat-runner ${args.join(' ')}`,
      });
    },
  };
  writeFileSync(stackFile, JSON.stringify(outputs, null, 2));
  return site;
}

/** Ids of the e2e runs' jobs in squeue (other people's jobs on the cluster are not ours to count). */
export function squeueIds(): string[] {
  const r = spawnSync('squeue', ['-h', '-o', '%i %j'], { encoding: 'utf8' });
  return r.stdout
    .split('\n')
    .filter((l) => / kdgat-e2e-/.test(l))
    .map((l) => l.split(' ')[0]!)
    .sort();
}

/** `scontrol show job -o ID`: one line per task (empty once SLURM has forgotten the job). */
export function scontrolJob(id: string): string {
  return spawnSync('scontrol', ['show', 'job', '-o', id], { encoding: 'utf8' }).stdout.trim();
}

/** Where each task of an `scontrolJob` answer stands (state, reason, restarts, run time), for errors. */
export function jobStanding(scontrol: string): string {
  if (!scontrol) return '(scontrol knows no such job)';
  const fields = ['JobId', 'JobState', 'Reason', 'Restarts', 'RunTime'];
  return scontrol
    .split('\n')
    .map((line) =>
      fields
        .map((f) => new RegExp(`\\b${f}=\\S+`).exec(line)?.[0])
        .filter(Boolean)
        .join(' '),
    )
    .join('; ');
}
