// Before anything is queued: what the plan will charge (worst and expected case), the requests
// history suggests, and the account's balance; a plan over the spec's budget is refused. The figures
// come from @kdgat/usage; this module wires them to the plan and says them.
import type { ResolvedExperiment, ResolvedStage } from '@kdgat/config';
import {
  applyRightSizing,
  balanceArgv,
  estimateCost,
  formatHours,
  formatUnits,
  parseBalance,
  percentile,
  rightSize,
  runsUnder,
  stageHistory,
  type CostEstimate,
  type RightSizing,
} from '@kdgat/usage';
import { runCommand } from '@kdgat/schedulers';
import type { Executor } from '@kdgat/transport';
import type { RunPlan } from './build.ts';

export class BudgetExceededError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BudgetExceededError';
  }
}

export interface Balance {
  amount: number | null;
  unit: string | null;
  /** Why it is unknown, or the command it came from. */
  note: string;
}

export interface PlanCosting {
  estimate: CostEstimate;
  sizing: Record<string, RightSizing>;
  balance: Balance;
  /** What `plan` prints. */
  lines: string[];
}

/** What a manifest keeps of it. */
export interface CostRecord {
  unit: string | null;
  source: string | null;
  worst: CostEstimate['worst'];
  expected: CostEstimate['expected'];
  expectedFromHistory: string[];
  budget?: number;
  balance?: Balance;
}

export type RightSized = Record<
  string,
  { cpus: number; memGB: number; time: string; basis: string[]; tasks: number; runs: number }
>;

function leadOf(resolved: ResolvedExperiment): number {
  const r = resolved.requeue as { enabled?: boolean; leadSeconds?: number } | undefined;
  return r?.enabled ? (r.leadSeconds ?? 0) : 0;
}

function workersOf(stage: ResolvedStage): number | undefined {
  const w = stage.overrides['data.num_workers'];
  return typeof w === 'number' ? w : undefined;
}

async function readBalance(resolved: ResolvedExperiment, executor?: Executor): Promise<Balance> {
  const cmd = resolved.cluster.balance;
  if (!cmd)
    return { amount: null, unit: null, note: `cluster ${resolved.cluster.name} names no balance command` };
  const argv = balanceArgv(cmd, resolved.account ?? resolved.cluster.account);
  const shown = argv.join(' ');
  try {
    const r = await Promise.race([
      // On the site's login node when it is reached over SSH (the balance is the site's to tell).
      executor ? executor.run(argv, { timeoutSeconds: 20 }) : runCommand(argv[0]!, argv.slice(1)),
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error('no answer in 20 s')), 20_000).unref()),
    ]);
    if (r.code !== 0)
      return {
        amount: null,
        unit: cmd.unit,
        note: `\`${shown}\` exited ${r.code}: ${(r.stderr || r.stdout).trim().split('\n')[0] ?? ''}`,
      };
    const amount = parseBalance(r.stdout, cmd);
    return amount === null
      ? { amount: null, unit: cmd.unit, note: `\`${shown}\` printed no amount matching /${cmd.pattern}/` }
      : { amount, unit: cmd.unit, note: `from \`${shown}\`` };
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return {
      amount: null,
      unit: cmd.unit,
      note: err.code === 'ENOENT' ? `${argv[0]} is not on PATH` : `\`${shown}\`: ${err.message}`,
    };
  }
}

/** A reproduced run keeps the sizes its source applied (`--from-manifest` of a `--right-size` run). */
export function applyRecordedSizes(resolved: ResolvedExperiment, rightSized: RightSized | undefined): void {
  for (const [id, r] of Object.entries(rightSized ?? {})) {
    const stage = resolved.stages.find((s) => s.id === id);
    if (stage) stage.resources = { ...stage.resources, cpus: r.cpus, memGB: r.memGB, time: r.time };
  }
}

/** Tasks each stage runs in this plan (array sizes summed over chunks). */
export function tasksPerStage(plan: RunPlan): Map<string, number> {
  const n = new Map<string, number>();
  for (const j of plan.jobs) n.set(j.stageId, (n.get(j.stageId) ?? 0) + (j.array ? j.array.size : 1));
  return n;
}

/**
 * Sizes from history (applied to `resolved.stages` when `apply`), the cost of the plan with the
 * requests it will render, the balance, and the lines to print. Throws BudgetExceededError when the
 * worst case is over `budget.maxBillingUnits`.
 */
export async function costPlan(input: {
  resolved: ResolvedExperiment;
  plan: RunPlan;
  runsRoot: string;
  apply: boolean;
  /** Where the balance command runs (a site over SSH); default this machine. */
  executor?: Executor;
}): Promise<PlanCosting & { rightSized?: RightSized }> {
  const { resolved, plan } = input;
  const runs = runsUnder(input.runsRoot);
  const sizing: Record<string, RightSizing> = {};
  const expectedSeconds: Record<string, number> = {};
  const rightSized: RightSized = {};
  const lines: string[] = [];
  for (const stage of resolved.stages) {
    const history = stageHistory(input.runsRoot, stage, runs);
    const partition =
      resolved.cluster.partitions.find((p) => p.name === stage.resources.partition) ?? resolved.partition;
    const s = rightSize({
      tasks: history.tasks,
      runs: history.runs.length,
      current: stage.resources,
      partition,
      leadSeconds: leadOf(resolved),
      ...(workersOf(stage) !== undefined ? { numWorkers: workersOf(stage)! } : {}),
    });
    sizing[stage.id] = s;
    const done = history.tasks
      .filter((t) => t.completed && t.elapsedSeconds !== null)
      .map((t) => t.elapsedSeconds!);
    if (done.length > 0) expectedSeconds[stage.id] = percentile(done, 0.5);
    if (input.apply && (s.cpus || s.memGB || s.time)) {
      stage.resources = applyRightSizing(stage.resources, s);
      rightSized[stage.id] = {
        cpus: stage.resources.cpus,
        memGB: stage.resources.memGB,
        time: stage.resources.time,
        basis: [s.cpus?.basis, s.memGB?.basis, s.time?.basis].filter((b): b is string => !!b),
        tasks: s.tasks,
        runs: s.runs,
      };
    }
  }
  const tasks = tasksPerStage(plan);
  const estimate = estimateCost(
    resolved.cluster,
    resolved.stages
      .filter((s) => tasks.has(s.id))
      .map((s) => ({
        id: s.id,
        tasks: tasks.get(s.id)!,
        resources: s.resources,
        ...(expectedSeconds[s.id] !== undefined ? { expectedSecondsPerTask: expectedSeconds[s.id]! } : {}),
      })),
  );
  const balance = await readBalance(resolved, input.executor);

  // --- what plan/train print
  const unit = estimate.unit;
  const money = (u: number | null) =>
    unit ? formatUnits(u, unit) : 'no charging rules in the cluster profile';
  lines.push(`cost (${resolved.cluster.name}${estimate.source ? `; ${estimate.source}` : ''}):`);
  for (const st of estimate.stages) {
    const e = st.expected;
    // A DDP job's billed cores count every task on the node: say so where there is more than one.
    const r = resolved.stages.find((s) => s.id === st.id)!.resources;
    const perNode =
      r.ntasksPerNode > 1 ? ` (${r.ntasksPerNode} tasks x ${r.cpus} cpus, ${r.memGB} GB per node)` : '';
    lines.push(
      `  ${st.id}: ${st.tasks} task(s) x ${st.effectiveCoresPerTask} billed core(s)${perNode}${st.gpusPerTask ? ` + ${st.gpusPerTask} GPU(s)` : ''} on ${st.partition}; ` +
        `worst (to the time limit) ${formatHours(st.worst.gpuHours)} GPU-h, ${formatHours(st.worst.coreHours)} core-h, ${money(st.worst.units)}; ` +
        (e
          ? `expected ${formatHours(e.gpuHours)} GPU-h, ${formatHours(e.coreHours)} core-h, ${money(e.units)}`
          : 'expected: no history (counted at the limit)'),
    );
  }
  lines.push(
    `  total: worst ${formatHours(estimate.worst.gpuHours)} GPU-h, ${formatHours(estimate.worst.coreHours)} core-h, ${money(estimate.worst.units)}; ` +
      `expected ${formatHours(estimate.expected.gpuHours)} GPU-h, ${formatHours(estimate.expected.coreHours)} core-h, ${money(estimate.expected.units)}` +
      (estimate.expectedFromHistory.length < estimate.stages.length
        ? ` (stages without history at their limit: ${estimate.stages
            .filter((s) => !estimate.expectedFromHistory.includes(s.id))
            .map((s) => s.id)
            .join(', ')})`
        : ''),
  );
  const requeue = resolved.requeue as { enabled?: boolean; maxRestarts?: number } | undefined;
  if (requeue?.enabled && (requeue.maxRestarts ?? 0) > 0)
    lines.push(
      `  (requeue may run a task up to ${requeue.maxRestarts} more time(s): at most ${(requeue.maxRestarts ?? 0) + 1}x the worst case)`,
    );
  lines.push(
    balance.amount !== null
      ? `  balance: ${balance.amount} ${balance.unit ?? ''} (${balance.note})`
      : `  balance: unknown (${balance.note})`,
  );
  lines.push('sizes from history (same stage, model, scale and dataset under the runs root):');
  for (const stage of resolved.stages) {
    const s = sizing[stage.id]!;
    if (!s.cpus && !s.memGB && !s.time) {
      lines.push(`  ${stage.id}: ${s.notes.join('; ')}`);
      continue;
    }
    const applied = input.apply ? ' (applied: --right-size)' : ' (apply with train --right-size)';
    lines.push(`  ${stage.id}: from ${s.tasks} finished task(s) of ${s.runs} run(s)${applied}`);
    for (const [name, v] of [
      ['cpus', s.cpus],
      ['memGB', s.memGB],
      ['time', s.time],
    ] as const)
      if (v) lines.push(`    ${name}: ${String(v.current)} -> ${String(v.value)}  (${v.basis})`);
    for (const n of s.notes) lines.push(`    note: ${n}`);
  }

  const budget = (resolved.spec as { budget?: { maxBillingUnits: number } }).budget;
  if (budget) {
    const worst = estimate.worst.units;
    if (worst === null)
      throw new BudgetExceededError(
        `budget: ${budget.maxBillingUnits} ${unit ?? ''} cannot be checked: a partition of this plan has no charging rates\n${lines.join('\n')}`,
      );
    if (worst > budget.maxBillingUnits)
      throw new BudgetExceededError(
        `the plan's worst case, ${formatUnits(worst, unit)}, is over budget.maxBillingUnits = ${budget.maxBillingUnits} ${unit}; nothing was queued.\n` +
          `${lines.join('\n')}\n` +
          `to fit: shorter resources.time, fewer sweep points or tasks, \`train --right-size\` once the stages have history, or a larger budget`,
      );
    lines.push(`budget: worst case ${formatUnits(worst, unit)} is within ${budget.maxBillingUnits} ${unit}`);
  }
  if (balance.amount !== null && estimate.worst.units !== null && estimate.worst.units > balance.amount)
    lines.push(
      `warning: the worst case (${formatUnits(estimate.worst.units, unit)}) is more than the balance (${balance.amount} ${balance.unit ?? ''})`,
    );
  return { estimate, sizing, balance, lines, ...(input.apply ? { rightSized } : {}) };
}

export function costRecord(c: PlanCosting, resolved: ResolvedExperiment): CostRecord {
  const budget = (resolved.spec as { budget?: { maxBillingUnits: number } }).budget;
  return {
    unit: c.estimate.unit,
    source: c.estimate.source,
    worst: c.estimate.worst,
    expected: c.estimate.expected,
    expectedFromHistory: c.estimate.expectedFromHistory,
    ...(budget ? { budget: budget.maxBillingUnits } : {}),
    balance: c.balance,
  };
}

/**
 * A resubmission of `tasks` task(s) of a stage with `resources` (a recovery) against the spec's
 * budget: its worst case (to its time limit, as `costPlan` counts), and why it may not be queued
 * when `committed` (the plan's worst case plus the resubmissions made so far) and it together are
 * over `budget.maxBillingUnits` or cannot be counted. No budget: never refused.
 */
export function resubmissionCost(
  resolved: ResolvedExperiment,
  stage: { id: string; tasks: number; resources: ResolvedStage['resources'] },
  committed: number | null,
): { worstUnits: number | null; refused?: string } {
  const estimate = estimateCost(resolved.cluster, [stage]);
  const worst = estimate.worst.units;
  const budget = (resolved.spec as { budget?: { maxBillingUnits: number } }).budget;
  if (!budget) return { worstUnits: worst };
  const unit = estimate.unit;
  if (worst === null || committed === null)
    return {
      worstUnits: worst,
      refused: `budget: ${budget.maxBillingUnits} ${unit ?? ''} cannot be checked: partition ${stage.resources.partition} has no charging rates`,
    };
  const total = committed + worst;
  if (total > budget.maxBillingUnits)
    return {
      worstUnits: worst,
      refused: `over budget: the run's worst case so far, ${formatUnits(committed, unit)}, plus this resubmission's ${formatUnits(worst, unit)} is ${formatUnits(total, unit)}, over budget.maxBillingUnits = ${budget.maxBillingUnits} ${unit ?? ''}`,
    };
  return { worstUnits: worst };
}
