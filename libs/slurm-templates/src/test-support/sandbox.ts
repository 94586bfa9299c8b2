/**
 * Test sandbox: a temp dir with stub `python`, `module`, `conda`, `nvidia-smi`, `scontrol` and `srun`
 * on PATH that record their argv (NUL-separated, one file per call) so tests can check that every
 * value arrived as data. Real bash runs the rendered scripts; only the cluster tools are stubbed.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  existsSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SITE_HELPER_MODULE } from '@kdgat/config';

const STUBS: Record<string, string> = {
  // python -m <module> STAGE --model M --scale S --dataset D --run-root R ... (or a declared pipeline's
  // -m MODULE STAGE ... --output-dir DIR); mode from STUB_PYTHON_MODE.
  // python -m <helpers> catalogue-append ... (the epilog): recorded as python-catalogue.*.argv.
  python: String.raw`#!/bin/bash
n=$(date +%s%N)
# The epilog's catalogue row (python -m <helpers> catalogue-append ...): recorded apart from the pipeline's calls.
if [[ $3 == catalogue-append ]]; then
  printf '%s\0' "$@" >"$STUB_LOG/python-catalogue.$n.argv"
  echo "catalogue: @{STUB_CATALOGUE_ANSWER:-stub row}"
  exit @{STUB_CATALOGUE_STATUS:-0}
fi
printf '%s\0' "$@" >"$STUB_LOG/python.$n.argv"
printf '%s' "$KD_GAT_CACHE_ROOT" >"$STUB_LOG/python.$n.cache_root"
printf '%s/%s' "@{HPC_SHARD_INDEX-unset}" "@{HPC_SHARD_COUNT-unset}" >"$STUB_LOG/python.$n.shard"
printf '%s' "@{PYTHONPATH:-}" >"$STUB_LOG/python.$n.pythonpath"
env -0 >"$STUB_LOG/python.$n.env"
stage=$3 model='' scale='' dataset='' root='' out=''
args=("$@")
for ((i = 0; i + 1 < $#; i++)); do
  case @{args[i]} in
    --model) model=@{args[i + 1]} ;; --scale) scale=@{args[i + 1]} ;;
    --dataset) dataset=@{args[i + 1]} ;; --run-root) root=@{args[i + 1]} ;;
    --output-dir) out=@{args[i + 1]} ;; # a declared pipeline given {run_dir}
  esac
done
run_dir=@{out:-$root/$dataset/@{model}_@{scale}_$stage}
mkdir -p "$run_dir"
case @{STUB_PYTHON_MODE:-ok} in
  ok)
    # STUB_PYTHON_WAIT_FOR=FILE: run until FILE exists (at most 10 s), e.g. until the sampler is set up.
    if [[ -n @{STUB_PYTHON_WAIT_FOR:-} ]]; then
      for ((t = 0; t < 200; t++)); do [[ -e $STUB_PYTHON_WAIT_FOR ]] && break; sleep 0.05; done
    fi
    sleep "@{STUB_PYTHON_SLEEP:-0}"
    printf '{"stage": "%s", "status": "ok", "peak_gpu_mem_mb": 2048.5, "epochs": 1}\n' "$stage" >"$run_dir/metrics.json"
    ;;
  fail) echo "stub python: failing on purpose" >&2; exit 3 ;;
  requeue-without-ack)
    trap 'exit 75' "$KD_GAT_REQUEUE_SIGNAL"
    touch "$STUB_LOG/python.started"
    for ((t = 0; t < @{STUB_PYTHON_WAIT_STEPS:-300}; t++)); do sleep 0.05; done
    exit 9
    ;;
  lightning)
    # As Lightning's SLURMEnvironment(auto_requeue=True): on the signal, requeue the job itself.
    trap 'touch "$STUB_LOG/python.signalled"; scontrol requeue "$SLURM_JOB_ID"' "$KD_GAT_REQUEUE_SIGNAL"
    trap 'exit 143' TERM
    touch "$STUB_LOG/python.started"
    for ((t = 0; t < @{STUB_PYTHON_WAIT_STEPS:-300}; t++)); do sleep 0.05; done
    exit 9
    ;;
  requeue)
    trap 'printf "{\"epoch\": 3}\n" >"$run_dir/requeue_ack.json"; exit 75' "$KD_GAT_REQUEUE_SIGNAL"
    touch "$STUB_LOG/python.started"
    for ((t = 0; t < @{STUB_PYTHON_WAIT_STEPS:-300}; t++)); do sleep 0.05; done
    exit 9
    ;;
esac
`,
  module: String.raw`#!/bin/bash
printf '%s\0' "$@" >"$STUB_LOG/module.$(date +%s%N).argv"
if [[ -n @{STUB_MODULE_SLEEP:-} ]]; then touch "$STUB_LOG/module.started"; sleep "$STUB_MODULE_SLEEP"; fi
`,
  conda: String.raw`#!/bin/bash
if [[ $1 == shell.bash && $2 == hook ]]; then
  # What the real hook does in essence: define the conda shell function.
  echo 'conda() { printf "%s\0" "$@" >"$STUB_LOG/conda.$(date +%s%N).argv"; }'
  exit 0
fi
printf '%s\0' "$@" >"$STUB_LOG/conda-cmd.$(date +%s%N).argv"
`,
  'nvidia-smi': String.raw`#!/bin/bash
if [[ $* == *--query-gpu* ]]; then
  # STUB_NVIDIA_SMI_MODE=ignore-term: a sampler that does not end on TERM (as a hung nvidia-smi).
  if [[ @{STUB_NVIDIA_SMI_MODE:-} == ignore-term ]]; then trap '' TERM; fi
  echo "$$" >"$STUB_LOG/nvidia-smi.sampler.pid"
  echo 'utilization.gpu [%], utilization.memory [%], memory.used [MiB], memory.total [MiB]'
  u=(90 80 0 100 70)
  for ((i = 0; ; i++)); do echo "@{u[i % 5]} %, 30 %, 4000 MiB, 16384 MiB"; sleep 0.05; done
fi
echo 'stub nvidia-smi snapshot'
`,
  scontrol: String.raw`#!/bin/bash
printf '%s\0' "$@" >"$STUB_LOG/scontrol.$(date +%s%N).argv"
`,
  srun: String.raw`#!/bin/bash
printf '%s\0' "$@" >"$STUB_LOG/srun.$(date +%s%N).argv"
while [[ $1 == --* ]]; do shift; done
exec "$@"
`,
};

export interface Sandbox {
  dir: string;
  bin: string;
  log: string;
  tmp: string;
  /** Path that hostile strings try to create; must never exist. */
  canary: string;
  env(extra?: Record<string, string>): Record<string, string>;
  /** argv of every recorded call of a stub, in call order. */
  calls(tool: string): string[][];
  write(rel: string, text: string, mode?: number): string;
  cleanup(): void;
}

export function makeSandbox(options: { stubs?: string[] } = {}): Sandbox {
  const dir = mkdtempSync(join(tmpdir(), 'hpc-sandbox-'));
  const bin = join(dir, 'bin');
  const log = join(dir, 'log');
  const tmp = join(dir, 'tmp');
  for (const d of [bin, log, tmp]) mkdirSync(d);
  for (const name of options.stubs ?? Object.keys(STUBS)) {
    // Stub texts write `@{` for bash's `${` so String.raw does not interpolate it.
    writeFileSync(join(bin, name), (STUBS[name] ?? '').replaceAll('@{', '${'), { mode: 0o755 });
  }
  const sandbox: Sandbox = {
    dir,
    bin,
    log,
    tmp,
    canary: join(dir, 'canary'),
    env: (extra = {}) => ({
      PATH: `${bin}:/usr/local/bin:/usr/bin:/bin`,
      HOME: dir,
      LANG: 'C.UTF-8',
      STUB_LOG: log,
      TMPDIR: tmp,
      // What a job script exports for its epilog (the tool's helpers' module).
      HPC_HELPER_MODULE: SITE_HELPER_MODULE,
      ...extra,
    }),
    calls: (tool) => recordedCalls(log, tool),
    write: (rel, text, mode = 0o644) => {
      const path = join(dir, rel);
      mkdirSync(join(path, '..'), { recursive: true });
      writeFileSync(path, text, { mode });
      return path;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
  return sandbox;
}

/** Call order of two stub records `TOOL.<ns timestamp>.argv`. */
const byStamp = (a: string, b: string) =>
  BigInt(a.split('.')[1] ?? 0) < BigInt(b.split('.')[1] ?? 0) ? -1 : 1;

/** argv of every call a stub recorded in `log`, in call order (file names carry a ns timestamp). */
export function recordedCalls(log: string, tool: string): string[][] {
  return readdirSync(log)
    .filter((f) => f.startsWith(`${tool}.`) && f.endsWith('.argv'))
    .sort(byStamp)
    .map((f) => {
      const parts = readFileSync(join(log, f), 'utf8').split('\0');
      parts.pop();
      return parts;
    });
}

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

export function runBash(
  script: string,
  args: string[],
  opts: { cwd: string; env: Record<string, string> },
): RunResult {
  const r = spawnSync('bash', [script, ...args], {
    cwd: opts.cwd,
    env: opts.env,
    encoding: 'utf8',
    timeout: 60_000,
    // A socket on stdin makes bash source ~/.bashrc (its rshd heuristic): give it none.
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (r.error) {
    // A hang says where it hung: the calls the stubs recorded and the end of the script's output.
    const log = opts.env.STUB_LOG;
    const calls = log
      ? readdirSync(log)
          .filter((f) => f.endsWith('.argv'))
          .sort(byStamp)
      : [];
    const tail = (text: string | null) => (text ?? '').split('\n').slice(-15).join('\n');
    throw new Error(
      `bash ${script} did not end (${r.error.message}); stub calls: ${calls.join(' ') || 'none'}\n` +
        `--- stdout (end) ---\n${tail(r.stdout)}\n--- stderr (end) ---\n${tail(r.stderr)}`,
    );
  }
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs a script in the background, sends `signal` once `readyFile` exists, and resolves at exit. */
export function runBashSignalled(
  script: string,
  opts: { cwd: string; env: Record<string, string>; readyFile: string; signal: NodeJS.Signals },
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [script], {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const started = Date.now();
    const poll = setInterval(() => {
      if (existsSync(opts.readyFile)) {
        clearInterval(poll);
        child.kill(opts.signal);
      } else if (Date.now() - started > 30_000) {
        clearInterval(poll);
        child.kill('SIGKILL');
        reject(new Error(`${opts.readyFile} never appeared; stdout: ${stdout}; stderr: ${stderr}`));
      }
    }, 20);
    child.on('error', reject);
    child.on('close', (status) => {
      clearInterval(poll);
      resolve({ status, stdout, stderr });
    });
  });
}

/** shellcheck over many files at once: returns its report ('' when clean). */
export function shellcheck(files: string[]): string {
  const r = spawnSync('shellcheck', ['--shell=bash', '--severity=style', '--format=gcc', ...files], {
    encoding: 'utf8',
  });
  if (r.error) throw r.error;
  return `${r.stdout}${r.stderr}`.trim();
}

/** `bash -n` over many files: returns the errors ('' when all parse). */
export function bashSyntax(files: string[]): string {
  const r = spawnSync(
    'bash',
    ['-c', 'rc=0; for f; do bash -n "$f" || rc=1; done; exit $rc', 'bash-n', ...files],
    {
      encoding: 'utf8',
    },
  );
  return r.status === 0 ? '' : r.stderr || `bash -n failed (${r.status})`;
}
