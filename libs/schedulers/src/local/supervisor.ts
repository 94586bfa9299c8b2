// One detached process per local job: waits for its afterok and afterany dependencies (and, task by task, aftercorr), runs the script's
// tasks with bash (at most the array's %K at a time), emulates SLURM's environment, enforces
// --time (with the --signal=B:SIG@lead warning first) and records every state change.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { cpus, hostname, tmpdir, userInfo } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { isActive } from '../core.ts';
import { parseElapsed } from '../slurm/parse.ts';
import { defaultLogPattern, expandLogPattern, parseSbatchDirectives } from './directives.ts';
import { checkOverrides, exportedVariables } from '../overrides.ts';
import {
  cancelMarker,
  readRecord,
  writeRecord,
  type LocalJobRecord,
  type LocalTaskRecord,
} from './records.ts';

const POLL_MS = 200;
const KILL_WAIT_MS = 5000;

const stateDir = process.argv[2] ?? '';
const id = process.argv[3] ?? '';
if (!stateDir || !id) {
  process.stderr.write('usage: supervisor.ts <stateDir> <jobId>\n');
  process.exit(2);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const record: LocalJobRecord = readRecord(stateDir, id)!;
const save = () => writeRecord(stateDir, record);
const cancelled = () => existsSync(cancelMarker(stateDir, id));
const now = () => new Date().toISOString();

function finishAll(state: LocalTaskRecord['state'], reason: string): void {
  for (const t of record.tasks) {
    if (isActive(t.state)) {
      t.state = state;
      t.reason = reason;
      t.endedAt ??= now();
    }
  }
  save();
}

async function waitForDependencies(): Promise<boolean> {
  for (;;) {
    if (cancelled()) {
      finishAll('CANCELLED', 'cancelled while pending');
      return false;
    }
    let allDone = true;
    for (const dep of record.request.dependsOn) {
      const r = readRecord(stateDir, dep);
      if (!r || r.tasks.some((t) => !isActive(t.state) && t.state !== 'COMPLETED')) {
        finishAll('CANCELLED', `DependencyNeverSatisfied (afterok:${dep})`);
        return false;
      }
      if (r.tasks.some((t) => t.state !== 'COMPLETED')) allDone = false;
    }
    // afterany: ended, whatever the outcome (a throttled sweep's earlier chunk draining).
    for (const dep of record.request.afterany ?? []) {
      const r = readRecord(stateDir, dep);
      if (r && r.tasks.some((t) => isActive(t.state))) allDone = false;
    }
    if (allDone) return true;
    for (const t of record.tasks) t.reason = 'Dependency';
    await sleep(POLL_MS);
  }
}

const script = readFileSync(record.request.scriptPath, 'utf8');
const directives = parseSbatchDirectives(script);
const req = record.request;
// A submission's overrides win over the script's lines, as on sbatch's command line: --time and
// --export here, --array at submit; --exclude and --mem mean nothing on one machine.
const overrides = checkOverrides(req);
const exported = overrides.has('export') ? exportedVariables(overrides.get('export')!) : {};
const cpusPerTask = Number(directives.get('cpus-per-task') ?? req.cpusPerTask ?? '1') || 1;
const limitSeconds = parseElapsed(overrides.get('time') ?? directives.get('time') ?? req.timeLimit ?? '');
const signalSpec = /^(B:)?([A-Z0-9]+)@(\d+)$/.exec(directives.get('signal') ?? req.signal ?? '');
const workDir = directives.get('chdir')
  ? resolve(record.request.cwd, directives.get('chdir')!)
  : record.request.cwd;
const isArray = record.request.array !== undefined;
const outputPattern = directives.get('output') ?? req.output ?? defaultLogPattern(isArray);
const errorPattern = directives.get('error') ?? req.error;

async function runTask(task: LocalTaskRecord): Promise<void> {
  const ids = {
    jobId: task.jobId,
    arrayJobId: isArray ? record.id : undefined,
    arrayIndex: task.index,
    name: record.request.name,
    user: userInfo().username,
    node: hostname(),
  };
  const logPath = (p: string) => {
    const expanded = expandLogPattern(p, ids);
    return isAbsolute(expanded) ? expanded : join(workDir, expanded);
  };
  const out = logPath(outputPattern);
  mkdirSync(dirname(out), { recursive: true });
  const outFd = openSync(out, 'a');
  let errFd = outFd;
  if (errorPattern) {
    const err = logPath(errorPattern);
    mkdirSync(dirname(err), { recursive: true });
    errFd = openSync(err, 'a');
  }
  const tmp = mkdtempSync(join(tmpdir(), `hpc-local-${task.jobId}-`));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...exported,
    SLURM_JOB_ID: task.jobId,
    SLURM_JOBID: task.jobId,
    SLURM_JOB_NAME: record.request.name,
    SLURM_SUBMIT_DIR: record.request.cwd,
    SLURM_CPUS_PER_TASK: String(cpusPerTask),
    SLURM_CPUS_ON_NODE: String(cpusPerTask),
    SLURM_NTASKS: '1',
    SLURM_JOB_NUM_NODES: '1',
    SLURM_NODELIST: hostname(),
    SLURMD_NODENAME: hostname(),
    SLURM_RESTART_COUNT: '0',
    HPC_SCHEDULER: 'local',
    TMPDIR: tmp,
  };
  if (isArray) {
    Object.assign(env, {
      SLURM_ARRAY_JOB_ID: record.id,
      SLURM_ARRAY_TASK_ID: String(task.index),
      SLURM_ARRAY_TASK_COUNT: String(record.request.array!.size),
      SLURM_ARRAY_TASK_MIN: '0',
      SLURM_ARRAY_TASK_MAX: String(record.request.array!.size - 1),
    });
  }
  const child: ChildProcess = spawn('bash', [record.request.scriptPath], {
    cwd: workDir,
    env,
    detached: true, // own process group, so cancel/timeout reach everything the script started
    stdio: ['ignore', outFd, errFd],
  });
  closeSync(outFd);
  if (errFd !== outFd) closeSync(errFd);
  task.state = 'RUNNING';
  task.reason = undefined;
  task.startedAt = now();
  task.pid = child.pid;
  save();

  let killedFor: 'CANCELLED' | 'TIMEOUT' | undefined;
  const killGroup = (sig: NodeJS.Signals) => {
    try {
      if (child.pid) process.kill(-child.pid, sig);
    } catch {
      /* already gone */
    }
  };
  const timers: NodeJS.Timeout[] = [];
  if (limitSeconds !== undefined) {
    if (signalSpec) {
      const lead = Number(signalSpec[3]);
      const sig = (
        signalSpec[2]!.startsWith('SIG') ? signalSpec[2] : `SIG${signalSpec[2]}`
      ) as NodeJS.Signals;
      timers.push(
        setTimeout(
          () => {
            // B: means the batch shell only, as in SLURM.
            try {
              if (signalSpec[1]) child.kill(sig);
              else killGroup(sig);
            } catch {
              /* gone */
            }
          },
          Math.max(0, limitSeconds - lead) * 1000,
        ),
      );
    }
    timers.push(
      setTimeout(() => {
        killedFor = 'TIMEOUT';
        killGroup('SIGTERM');
        timers.push(setTimeout(() => killGroup('SIGKILL'), KILL_WAIT_MS));
      }, limitSeconds * 1000),
    );
  }
  const watcher = setInterval(() => {
    if (!killedFor && cancelled()) {
      killedFor = 'CANCELLED';
      killGroup('SIGTERM');
      timers.push(setTimeout(() => killGroup('SIGKILL'), KILL_WAIT_MS));
    }
  }, POLL_MS);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((res) =>
    child.on('exit', (c, s) => res([c, s])),
  );
  clearInterval(watcher);
  for (const t of timers) clearTimeout(t);
  rmSync(tmp, { recursive: true, force: true });
  task.endedAt = now();
  task.pid = undefined;
  task.exitCode = `${code ?? 0}:${signal ? signalNumber(signal) : 0}`;
  task.state = killedFor ?? (code === 0 ? 'COMPLETED' : 'FAILED');
  if (task.state === 'FAILED') task.reason = 'NonZeroExitCode';
  save();
}

function signalNumber(sig: NodeJS.Signals): number {
  const table: Partial<Record<NodeJS.Signals, number>> = {
    SIGKILL: 9,
    SIGTERM: 15,
    SIGINT: 2,
    SIGUSR1: 10,
    SIGUSR2: 12,
  };
  return table[sig] ?? 1;
}

/**
 * `aftercorr`: task i of this array waits for task i of each listed array. 'run' once they all
 * completed, 'never' (with the dependency) once one of them ended otherwise, else 'wait'.
 */
function correspondingReady(task: LocalTaskRecord): { ready: 'run' | 'wait' | 'never'; dep?: string } {
  for (const dep of record.request.aftercorr ?? []) {
    const other = readRecord(stateDir, dep)?.tasks.find((t) => t.index === task.index);
    if (!other || (!isActive(other.state) && other.state !== 'COMPLETED')) return { ready: 'never', dep };
    if (other.state !== 'COMPLETED') return { ready: 'wait' };
  }
  return { ready: 'run' };
}

async function main(): Promise<void> {
  if (!(await waitForDependencies())) return;
  const arrayLimit = record.request.array?.concurrency || record.tasks.length;
  const cpuLimit = Math.max(1, Math.floor(cpus().length / cpusPerTask));
  const parallel = Math.max(1, Math.min(arrayLimit, cpuLimit));
  const queue = [...record.tasks];
  const running = new Set<Promise<void>>();
  while (queue.length > 0 || running.size > 0) {
    if (cancelled()) {
      for (const t of queue) {
        t.state = 'CANCELLED';
        t.endedAt = now();
      }
      queue.length = 0;
      save();
    }
    for (let i = 0; i < queue.length && running.size < parallel;) {
      const task = queue[i]!;
      const { ready, dep } = correspondingReady(task);
      if (ready === 'wait') {
        task.reason = 'Dependency';
        i++;
        continue;
      }
      queue.splice(i, 1);
      if (ready === 'never') {
        task.state = 'CANCELLED';
        task.reason = `DependencyNeverSatisfied (aftercorr:${dep})`;
        task.endedAt = now();
        save();
        continue;
      }
      const p = runTask(task).finally(() => running.delete(p));
      running.add(p);
    }
    if (running.size > 0 || queue.length > 0) await Promise.race([...running, sleep(POLL_MS)]);
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`supervisor ${id}: ${e instanceof Error ? e.stack : String(e)}\n`);
  finishAll('FAILED', `local supervisor error: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
