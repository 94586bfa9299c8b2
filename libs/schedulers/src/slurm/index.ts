// SLURM through its own commands: sbatch --parsable / --test-only, scancel, squeue,
// scontrol show job|config, and sacct only where accounting is configured. They run through an
// executor of @kdgat/transport: on this machine, or on the site's login node over one SSH master.
import { localExecutor, type Executor, type RunResult } from '@kdgat/transport';
import {
  SchedulerError,
  isActive,
  type PreflightResult,
  type Scheduler,
  type SchedulerLimits,
  type SubmitRequest,
  type TaskStatus,
} from '../core.ts';
import { checkOverrides } from '../overrides.ts';
import {
  SACCT_FIELDS,
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
 * reads and `--test-only` checks; the call adds only what exists at submission: the dependencies,
 * and a recovery's overrides (`request.overrides`).
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
  const any = request.afterany ?? [];
  if (mode === 'submit' && request.dependsOn.length + corr.length + any.length > 0) {
    // Comma: every listed condition must hold.
    const parts = [
      ...(request.dependsOn.length > 0 ? [`afterok:${request.dependsOn.join(':')}`] : []),
      ...(corr.length > 0 ? [`aftercorr:${corr.join(':')}`] : []),
      ...(any.length > 0 ? [`afterany:${any.join(':')}`] : []),
    ];
    args.push(`--dependency=${parts.join(',')}`, '--kill-on-invalid-dep=yes');
  }
  // A submission's own options (a recovery's --exclude, --mem, …): before the script, so they win
  // over its #SBATCH lines; checked against SUBMIT_OVERRIDES first.
  checkOverrides(request);
  args.push(...(request.overrides ?? []), request.scriptPath);
  return args;
}

type CommandResult = Pick<RunResult, 'code' | 'stdout' | 'stderr'>;

/** Seconds any one scheduler command may take (a busy slurmctld answers within this). */
const COMMAND_TIMEOUT_S = 120;

/**
 * One poll as one call: squeue for every job, then `scontrol show job` for each (exit codes and
 * restart counts squeue lacks), each section closed by a marker line with its status.
 * $1: the ids joined with commas, $2: the squeue format, $3: the cluster (`-M`; empty: the login
 * node's own), then the ids.
 */
const QUERY_SCRIPT = `ids=$1 cluster=$3
squeue \${cluster:+-M "$cluster"} -h -r --jobs="$ids" -o "$2"; echo "@@hpc squeue $?"
shift 3
for id in "$@"; do scontrol \${cluster:+-M "$cluster"} show job -o "$id" 2>/dev/null; echo "@@hpc scontrol $id $?"; done`;

/**
 * The poll's third section where the cluster keeps accounting: one sacct for every job, steps
 * included (what was used is in the steps; never one sacct per job: slurmdbd is shared).
 */
const SACCT_SECTION = `sacct \${cluster:+-M "$cluster"} -n -P --jobs="$ids" -o ${SACCT_FIELDS} 2>/dev/null; echo "@@hpc sacct $?"`;

/** QUERY_SCRIPT with the sacct section where accounting is on. */
export function queryScript(accounting: boolean): string {
  return accounting ? `${QUERY_SCRIPT}\n${SACCT_SECTION}` : QUERY_SCRIPT;
}

interface Section {
  text: string;
  code: number;
}

/** The sections of the poll's output: squeue's, scontrol's per job and sacct's, with their statuses. */
export function splitQueryOutput(stdout: string): {
  squeue: Section;
  scontrol: Map<string, Section>;
  /** Absent when the poll did not ask sacct. */
  sacct?: Section;
} {
  const scontrol = new Map<string, Section>();
  let squeue: Section = { text: '', code: 1 };
  let sacct: Section | undefined;
  let buf: string[] = [];
  for (const line of stdout.split('\n')) {
    const m = /^@@hpc (squeue|scontrol|sacct)(?: (\S+))? (\d+)$/.exec(line);
    if (!m) {
      buf.push(line);
      continue;
    }
    const section = { text: buf.join('\n'), code: Number(m[3]) };
    if (m[1] === 'squeue') squeue = section;
    else if (m[1] === 'sacct') sacct = section;
    else scontrol.set(m[2]!, section);
    buf = [];
  }
  return { squeue, scontrol, ...(sacct ? { sacct } : {}) };
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
  readonly #executor: Executor;
  readonly #cluster: string | undefined;

  /**
   * `extraArgs` go on every sbatch call (the bench submits with `--hold`); `executor` is where the
   * commands run (default: this machine); `cluster` is the SLURM cluster every command names with
   * `-M` (another cluster of the site under the same slurmdbd; default: the login node's own).
   */
  constructor(options: { extraArgs?: readonly string[]; executor?: Executor; cluster?: string } = {}) {
    this.#extraArgs = options.extraArgs ?? [];
    this.#executor = options.executor ?? localExecutor();
    this.#cluster = options.cluster;
  }

  /** Where the commands run, in words (`local`, `user@host:port`, `… -M annex`). */
  get target(): string {
    return this.#cluster ? `${this.#executor.target} -M ${this.#cluster}` : this.#executor.target;
  }

  /** The SLURM cluster the commands name (`-M`), if not the login node's own. */
  get cluster(): string | undefined {
    return this.#cluster;
  }

  /** `-M <cluster>` where the scheduler names one. */
  get #m(): string[] {
    return this.#cluster ? ['-M', this.#cluster] : [];
  }

  #run(argv: readonly string[], cwd?: string): Promise<RunResult> {
    return this.#executor.run(argv, { timeoutSeconds: COMMAND_TIMEOUT_S, ...(cwd ? { cwd } : {}) });
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
      const r = await this.#run(['scontrol', ...this.#m, 'show', 'config']);
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

  async activeJobsOfUser(): Promise<number> {
    // -r: one line per array task, pending ones included (SLURM's per-user limits count tasks).
    const r = await this.#run(['squeue', ...this.#m, '--me', '-h', '-r', '-t', 'PD,R,CF,CG,S', '-o', '%i']);
    if (r.code !== 0) throw new SchedulerError(`squeue --me failed: ${reasonOf(r)}`, 'squeue --me', r.stderr);
    return r.stdout.split('\n').filter((l) => l.trim() !== '').length;
  }

  async accountingEnabled(): Promise<boolean> {
    const cfg = await this.#showConfig();
    const storage = cfg.get('AccountingStorageType') ?? '';
    return storage !== '' && !/none/i.test(storage) && !/^\(null\)$/.test(storage);
  }

  async preflight(request: SubmitRequest): Promise<PreflightResult> {
    this.#preflightCalls++;
    const r = await this.#run(
      ['sbatch', ...this.#m, ...sbatchArgs(request, 'test', this.#extraArgs)],
      request.cwd,
    );
    const text = (r.stderr + r.stdout).trim();
    if (r.code === 0) return { ok: true, message: text.replace(/^sbatch:\s*/gm, '') };
    return { ok: false, message: reasonOf(r).replace(/^sbatch:\s*(error:\s*)?/i, '') };
  }

  /**
   * `sbatch --test-only` of a script given as text (on stdin): where and when the controller would
   * start it now, for placement across the site's clusters before any script is written there.
   */
  async probe(script: string): Promise<PreflightResult> {
    this.#preflightCalls++;
    const r = await this.#executor.run(['sbatch', ...this.#m, '--test-only'], {
      timeoutSeconds: COMMAND_TIMEOUT_S,
      input: script,
    });
    const text = (r.stderr + r.stdout).trim();
    if (r.code === 0) return { ok: true, message: text.replace(/^sbatch:\s*/gm, '') };
    return { ok: false, message: reasonOf(r).replace(/^sbatch:\s*(error:\s*)?/i, '') };
  }

  async submit(request: SubmitRequest): Promise<string> {
    const args = sbatchArgs(request, 'submit', this.#extraArgs);
    this.#submitCalls++;
    const r = await this.#run(['sbatch', ...this.#m, ...args], request.cwd);
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
    const r = await this.#run(['scancel', ...this.#m, ...jobIds]);
    if (r.code !== 0)
      throw new SchedulerError(`scancel failed: ${reasonOf(r)}`, `scancel ${jobIds.join(' ')}`, r.stderr);
  }

  /**
   * One remote call for every job: squeue, then `scontrol show job` per job, and where the cluster
   * keeps accounting one sacct for them all, in one remote shell. sacct's state is final for an
   * ended task (squeue and scontrol forget jobs after MinJobAge) and brings what it used; without
   * accounting, or when sacct fails, the answer is squeue's and scontrol's alone.
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
    // The configuration is read once per scheduler; a cluster whose answer cannot be read is polled without sacct.
    const accounting = await this.accountingEnabled().catch(() => false);
    const r = await this.#run([
      'sh',
      '-c',
      queryScript(accounting),
      'sh',
      jobIds.join(','),
      SQUEUE_FORMAT,
      this.#cluster ?? '',
      ...jobIds,
    ]);
    if (r.code !== 0)
      throw new SchedulerError(
        `squeue/scontrol failed on ${this.target}: ${reasonOf(r)}`,
        'squeue',
        r.stderr,
      );
    const sections = splitQueryOutput(r.stdout);
    if (sections.squeue.code === 0)
      for (const t of parseSqueue(sections.squeue.text)) if (jobIds.includes(t.jobId)) add(t);
    // scontrol gives exit codes and restart counts squeue lacks.
    for (const id of jobIds) {
      const sc = sections.scontrol.get(id);
      if (sc?.code !== 0) continue;
      for (const t of parseShowJob(sc.text).filter((x) => x.jobId === id)) {
        const seen = result.get(id)?.find((x) => x.arrayIndex === t.arrayIndex);
        add(seen ? { ...seen, ...t } : t);
      }
    }
    if (sections.sacct?.code === 0)
      for (const t of parseSacct(sections.sacct.text)) {
        if (!jobIds.includes(t.jobId)) continue;
        const seen = result.get(t.jobId)?.find((x) => x.arrayIndex === t.arrayIndex);
        if (!seen) add(t);
        // An ended task: sacct's record is the final word (state, exit code, elapsed, usage).
        else if (!isActive(t.state)) add({ ...seen, ...t });
        else if (!seen.nodes && t.nodes) add({ ...seen, nodes: t.nodes });
      }
    return result;
  }
}
