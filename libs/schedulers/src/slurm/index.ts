// SLURM through its own commands: sbatch --parsable / --test-only, scancel, squeue,
// scontrol show job|config, and sacct only where accounting is configured.
import { runCommand, type CommandResult } from '../exec.ts';
import {
  SchedulerError,
  type PreflightResult,
  type Scheduler,
  type SchedulerLimits,
  type SubmitRequest,
  type TaskStatus,
} from '../core.ts';
import {
  SQUEUE_FORMAT,
  parseParsableJobId,
  parseSacct,
  parseShowConfig,
  parseShowJob,
  parseSqueue,
} from './parse.ts';

/**
 * The sbatch arguments (besides the script) for a request; pure, shared by preflight and submit.
 * Resources (`--array`, `--signal`, …) are the script's own `#SBATCH` lines, the one place a user
 * reads and `--test-only` checks; the call adds only what exists at submission: the dependencies.
 */
export function sbatchArgs(
  request: SubmitRequest,
  mode: 'submit' | 'test',
  extra: readonly string[] = [],
): string[] {
  const args = mode === 'submit' ? ['--parsable', ...extra] : ['--test-only', ...extra];
  // Dependencies on jobs that do not exist yet make --test-only fail: preflight checks the
  // resources only, submission adds the chain.
  const corr = request.aftercorr ?? [];
  if (mode === 'submit' && request.dependsOn.length + corr.length > 0) {
    // Comma: every listed condition must hold.
    const parts = [
      ...(request.dependsOn.length > 0 ? [`afterok:${request.dependsOn.join(':')}`] : []),
      ...(corr.length > 0 ? [`aftercorr:${corr.join(':')}`] : []),
    ];
    args.push(`--dependency=${parts.join(',')}`, '--kill-on-invalid-dep=yes');
  }
  args.push(request.scriptPath);
  return args;
}

function reasonOf(result: CommandResult): string {
  const lines = (result.stderr + result.stdout)
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  return lines.find((l) => /error/i.test(l)) ?? lines.join(' ') ?? `exit ${result.code}`;
}

export class SlurmScheduler implements Scheduler {
  readonly kind = 'slurm' as const;
  #submitCalls = 0;
  #preflightCalls = 0;
  #config: Map<string, string> | undefined;
  readonly #extraArgs: readonly string[];

  /** `extraArgs` go on every sbatch call (the bench submits with `--hold`). */
  constructor(options: { extraArgs?: readonly string[] } = {}) {
    this.#extraArgs = options.extraArgs ?? [];
  }

  get submitCalls(): number {
    return this.#submitCalls;
  }

  /** `sbatch --test-only` calls made so far. */
  get preflightCalls(): number {
    return this.#preflightCalls;
  }

  async #showConfig(): Promise<Map<string, string>> {
    if (!this.#config) {
      const r = await runCommand('scontrol', ['show', 'config']);
      if (r.code !== 0)
        throw new SchedulerError(
          `scontrol show config failed: ${reasonOf(r)}`,
          'scontrol show config',
          r.stderr,
        );
      this.#config = parseShowConfig(r.stdout);
    }
    return this.#config;
  }

  async limits(): Promise<SchedulerLimits> {
    const cfg = await this.#showConfig();
    const max = Number(cfg.get('MaxArraySize') ?? '1001');
    return { maxArraySize: Number.isFinite(max) && max > 0 ? max : 1001 };
  }

  async accountingEnabled(): Promise<boolean> {
    const cfg = await this.#showConfig();
    const storage = cfg.get('AccountingStorageType') ?? '';
    return storage !== '' && !/none/i.test(storage) && !/^\(null\)$/.test(storage);
  }

  async preflight(request: SubmitRequest): Promise<PreflightResult> {
    this.#preflightCalls++;
    const r = await runCommand('sbatch', sbatchArgs(request, 'test', this.#extraArgs), { cwd: request.cwd });
    const text = (r.stderr + r.stdout).trim();
    if (r.code === 0) return { ok: true, message: text.replace(/^sbatch:\s*/gm, '') };
    return { ok: false, message: reasonOf(r).replace(/^sbatch:\s*(error:\s*)?/i, '') };
  }

  async submit(request: SubmitRequest): Promise<string> {
    const args = sbatchArgs(request, 'submit', this.#extraArgs);
    this.#submitCalls++;
    const r = await runCommand('sbatch', args, { cwd: request.cwd });
    if (r.code !== 0) {
      throw new SchedulerError(
        `sbatch refused ${request.name}: ${reasonOf(r).replace(/^sbatch:\s*(error:\s*)?/i, '')}`,
        `sbatch ${args.join(' ')}`,
        r.stderr,
      );
    }
    return parseParsableJobId(r.stdout);
  }

  async cancel(jobIds: string[]): Promise<void> {
    if (jobIds.length === 0) return;
    const r = await runCommand('scancel', jobIds);
    if (r.code !== 0)
      throw new SchedulerError(`scancel failed: ${reasonOf(r)}`, `scancel ${jobIds.join(' ')}`, r.stderr);
  }

  /**
   * One squeue call for every job; one `scontrol show job` per job (not per task) that squeue
   * no longer lists; sacct only for what scontrol has forgotten, and only with accounting.
   */
  async query(jobIds: string[]): Promise<Map<string, TaskStatus[]>> {
    const result = new Map<string, TaskStatus[]>();
    if (jobIds.length === 0) return result;
    const add = (t: TaskStatus) => {
      const list = result.get(t.jobId) ?? [];
      const i = list.findIndex((x) => x.arrayIndex === t.arrayIndex);
      if (i >= 0) list[i] = t;
      else list.push(t);
      result.set(t.jobId, list);
    };
    const sq = await runCommand('squeue', ['-h', '-r', `--jobs=${jobIds.join(',')}`, '-o', SQUEUE_FORMAT]);
    if (sq.code === 0) for (const t of parseSqueue(sq.stdout)) if (jobIds.includes(t.jobId)) add(t);
    // scontrol gives exit codes and restart counts squeue lacks; ask it for every job that
    // squeue did not show as running/pending-only, i.e. finished or partly finished arrays.
    const missing: string[] = [];
    for (const id of jobIds) {
      const tasks = result.get(id);
      const r = await runCommand('scontrol', ['show', 'job', '-o', id]);
      if (r.code === 0) {
        const fromScontrol = parseShowJob(r.stdout).filter((t) => t.jobId === id);
        for (const t of fromScontrol) {
          const seen = tasks?.find((x) => x.arrayIndex === t.arrayIndex);
          add(seen ? { ...seen, ...t } : t);
        }
        if (fromScontrol.length === 0 && !tasks) missing.push(id);
      } else if (!tasks) missing.push(id);
    }
    if (missing.length > 0 && (await this.accountingEnabled())) {
      const r = await runCommand('sacct', [
        '-n',
        '-P',
        '-X',
        `--jobs=${missing.join(',')}`,
        '-o',
        'JobIDRaw,JobID,State,ExitCode,ElapsedRaw',
      ]);
      if (r.code === 0) for (const t of parseSacct(r.stdout)) add(t);
    }
    return result;
  }
}
