// The local scheduler: the same rendered scripts, run with bash on this machine by a detached
// supervisor per job (supervisor.ts), honouring afterok dependencies and array concurrency,
// with the SLURM environment variables a job script reads emulated.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync, closeSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCommand } from '../exec.ts';
import {
  SchedulerError,
  isActive,
  type PreflightResult,
  type Scheduler,
  type SchedulerLimits,
  type SubmitRequest,
  type TaskStatus,
} from '../core.ts';
import { parseSbatchDirectives } from './directives.ts';
import { arrayIndicesOf, checkOverrides } from '../overrides.ts';
import {
  allocateJobIds,
  cancelMarker,
  pidAlive,
  readRecord,
  writeRecord,
  type LocalJobRecord,
} from './records.ts';

const SUPERVISOR = fileURLToPath(new URL('./supervisor.ts', import.meta.url));

export class LocalScheduler implements Scheduler {
  readonly kind = 'local' as const;
  readonly stateDir: string;
  #submitCalls = 0;

  constructor(stateDir: string) {
    this.stateDir = stateDir;
  }

  get submitCalls(): number {
    return this.#submitCalls;
  }

  async limits(): Promise<SchedulerLimits> {
    return { maxArraySize: Number.MAX_SAFE_INTEGER };
  }

  async preflight(request: SubmitRequest): Promise<PreflightResult> {
    if (!existsSync(request.scriptPath))
      return { ok: false, message: `script ${request.scriptPath} does not exist` };
    const syntax = await runCommand('bash', ['-n', request.scriptPath]);
    if (syntax.code !== 0)
      return { ok: false, message: `bash -n ${request.scriptPath}: ${syntax.stderr.trim()}` };
    const directives = parseSbatchDirectives(readFileSync(request.scriptPath, 'utf8'));
    const wanted = Number(directives.get('cpus-per-task') ?? request.cpusPerTask ?? 1);
    const have = cpus().length;
    if (wanted > have) {
      return {
        ok: false,
        message: `requested ${wanted} CPUs per task (--cpus-per-task); this machine has ${have}`,
      };
    }
    return { ok: true, message: `would run locally with bash (${wanted} of ${have} CPUs per task)` };
  }

  async submit(request: SubmitRequest): Promise<string> {
    this.#submitCalls++;
    const overrides = checkOverrides(request);
    for (const dep of [...request.dependsOn, ...(request.aftercorr ?? []), ...(request.afterany ?? [])]) {
      if (!readRecord(this.stateDir, dep)) {
        throw new SchedulerError(
          `local scheduler refused ${request.name}: dependency job ${dep} does not exist`,
          'submit',
          '',
        );
      }
    }
    // `--array=3,5` (a recovery of some tasks) runs those indices of the script's array only.
    const size = request.array?.size ?? 0;
    const chosen = overrides.get('array');
    const indices = chosen === undefined ? Array.from({ length: size }, (_, i) => i) : arrayIndicesOf(chosen);
    const outside = indices.filter((i) => i >= size);
    if (outside.length > 0)
      throw new SchedulerError(
        `local scheduler refused ${request.name}: --array=${chosen ?? ''} names task(s) ${outside.join(',')}, ` +
          `expected indices below the array's size ${size}`,
        'submit',
        '',
      );
    const first = await allocateJobIds(this.stateDir, indices.length + 1);
    const id = String(first);
    const record: LocalJobRecord = {
      id,
      request,
      submittedAt: new Date().toISOString(),
      tasks: request.array
        ? indices.map((index, i) => ({
            index,
            jobId: String(first + 1 + i),
            state: 'PENDING' as const,
          }))
        : [{ jobId: id, state: 'PENDING' as const }],
    };
    writeRecord(this.stateDir, record);
    mkdirSync(join(this.stateDir, 'supervisors'), { recursive: true });
    const log = openSync(join(this.stateDir, 'supervisors', `${id}.log`), 'a');
    const child = spawn(process.execPath, [SUPERVISOR, this.stateDir, id], {
      detached: true,
      stdio: ['ignore', log, log],
      env: process.env,
    });
    closeSync(log);
    child.unref();
    writeFileSync(join(this.stateDir, `${id}.pid`), `${child.pid}\n`);
    return id;
  }

  async cancel(jobIds: string[]): Promise<void> {
    for (const id of jobIds) {
      if (!readRecord(this.stateDir, id))
        throw new SchedulerError(`local scheduler: no job ${id}`, 'cancel', '');
      writeFileSync(cancelMarker(this.stateDir, id), new Date().toISOString() + '\n');
    }
    // The supervisors stop their tasks within a poll interval; wait so `cancel` returns settled.
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const states = await this.query(jobIds);
      if ([...states.values()].flat().every((t) => !isActive(t.state))) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async query(jobIds: string[]): Promise<Map<string, TaskStatus[]>> {
    const out = new Map<string, TaskStatus[]>();
    for (const id of jobIds) {
      const record = readRecord(this.stateDir, id);
      if (!record) continue;
      const pidFile = join(this.stateDir, `${id}.pid`);
      const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) : undefined;
      const supervisorGone = !pidAlive(pid);
      out.set(
        id,
        record.tasks.map((t) => {
          const status: TaskStatus = { jobId: id, state: t.state, taskJobId: t.jobId };
          if (t.index !== undefined) status.arrayIndex = t.index;
          if (t.exitCode !== undefined) status.exitCode = t.exitCode;
          if (t.reason !== undefined) status.reason = t.reason;
          if (t.startedAt) {
            const end = t.endedAt ? Date.parse(t.endedAt) : Date.now();
            status.elapsedSeconds = Math.round((end - Date.parse(t.startedAt)) / 1000);
          }
          if (isActive(t.state) && supervisorGone) {
            // Give a just-spawned supervisor a moment before calling it dead.
            const age = Date.now() - Date.parse(record.submittedAt);
            if (age > 5000) {
              status.state = 'NODE_FAIL';
              status.reason = 'local supervisor process exited';
            }
          }
          return status;
        }),
      );
    }
    return out;
  }
}
