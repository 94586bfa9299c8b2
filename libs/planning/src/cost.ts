// Before anything is queued, in steps of their own: the requests history suggests (right-sizing,
// new stages; the spec is not changed), what the plan will charge (worst and expected case), the
// account's balance, and the budget check. The figures come from @kdgat/usage; what is printed
// about them is the guard phase's (libs/runs/src/cost-lines.ts).
import type { ResolvedExperiment, ResolvedStage } from '@kdgat/config';
import {
  applyRightSizing,
  balanceArgv,
  estimateCost,
  expectedSecondsPerTask,
  formatUnits,
  parseBalance,
  rightSize,
  runsUnder,
  stageHistory,
  type CostEstimate,
  type RightSizing,
  type StageHistory,
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

/** What a plan will charge, what history suggests, and the balance: recorded in the manifest. */
export interface PlanCosting {
  estimate: CostEstimate;
  sizing: Record<string, RightSizing>;
  balance: Balance;
}

/** What a manifest keeps of it. */
export interface CostRecord {
  unit: string | null;
  source: string | null;
  worst: CostEstimate['worst'];
  expected: CostEstimate['expected'];
  expectedFromHistory: string[];
  /**
   * Per stage id, in the billing unit (null without rates): its tasks and what they cost together,
   * worst case and expected (the worst case where the stage has no history). The catalogue's rows
   * carry one task's share.
   */
  stages?: Record<string, { tasks: number; worstUnits: number | null; expectedUnits: number | null }>;
  budget?: number;
  balance?: Balance;
}

export type RightSized = Record<
  string,
  { cpus: number; memGB: number; time: string; basis: string[]; tasks: number; runs: number }
>;

/** What right-sizing made of the stages. */
export interface Sizing {
  /** The stages as they will be rendered: with the suggested sizes when applied, else as given. */
  stages: ResolvedStage[];
  /** What history suggests for each stage, applied or not. */
  suggested: Record<string, RightSizing>;
  /** The sizes applied (`--right-size`), as the manifest records them. */
  rightSized?: RightSized;
}

/** Finished tasks of each stage (same stage, model, scale, dataset) under the runs root. */
export function stageHistories(resolved: ResolvedExperiment, runsRoot: string): Map<string, StageHistory> {
  const runs = runsUnder(runsRoot);
  return new Map(resolved.stages.map((stage) => [stage.id, stageHistory(runsRoot, stage, runs)]));
}

/** A reproduced run keeps the sizes its source applied (`--from-manifest` of a `--right-size` run). */
export function withRecordedSizes(
  stages: readonly ResolvedStage[],
  rightSized: RightSized | undefined,
): ResolvedStage[] {
  return stages.map((stage) => {
    const r = rightSized?.[stage.id];
    return r
      ? { ...stage, resources: { ...stage.resources, cpus: r.cpus, memGB: r.memGB, time: r.time } }
      : stage;
  });
}

/**
 * Right-sizing: the cpus, memory and time each stage's history suggests and, with `apply`
 * (`--right-size`), new stages that ask for them. Pure: `stages` are not changed.
 */
export function sizeStages(
  resolved: ResolvedExperiment,
  stages: readonly ResolvedStage[],
  histories: ReadonlyMap<string, StageHistory>,
  apply: boolean,
): Sizing {
  const suggested: Record<string, RightSizing> = {};
  const rightSized: RightSized = {};
  const leadSeconds = resolved.requeue.enabled ? resolved.requeue.leadSeconds : 0;
  const sized = stages.map((stage) => {
    const history = histories.get(stage.id) ?? { runs: [], tasks: [] };
    const partition =
      resolved.cluster.partitions.find((p) => p.name === stage.resources.partition) ?? resolved.partition;
    const workers = stage.overrides['data.num_workers'];
    const s = rightSize({
      tasks: history.tasks,
      runs: history.runs.length,
      current: stage.resources,
      partition,
      leadSeconds,
      ...(typeof workers === 'number' ? { numWorkers: workers } : {}),
    });
    suggested[stage.id] = s;
    if (!apply || !(s.cpus || s.memGB || s.time)) return stage;
    const resources = applyRightSizing(stage.resources, s);
    rightSized[stage.id] = {
      cpus: resources.cpus,
      memGB: resources.memGB,
      time: resources.time,
      basis: [s.cpus?.basis, s.memGB?.basis, s.time?.basis].filter((b): b is string => !!b),
      tasks: s.tasks,
      runs: s.runs,
    };
    return { ...stage, resources };
  });
  return { stages: sized, suggested, ...(apply ? { rightSized } : {}) };
}

/** Tasks each stage runs in this plan (array sizes summed over chunks). */
export function tasksPerStage(plan: RunPlan): Map<string, number> {
  const n = new Map<string, number>();
  for (const j of plan.jobs) n.set(j.stageId, (n.get(j.stageId) ?? 0) + (j.array ? j.array.size : 1));
  return n;
}

/**
 * What the plan will charge with the requests it will render: worst case (every task to its time
 * limit) and expected case (each task as long as the stage ran before). Pure.
 */
export function estimatePlanCost(
  resolved: ResolvedExperiment,
  stages: readonly ResolvedStage[],
  plan: RunPlan,
  histories: ReadonlyMap<string, StageHistory>,
): CostEstimate {
  const tasks = tasksPerStage(plan);
  return estimateCost(
    resolved.cluster,
    stages
      .filter((s) => tasks.has(s.id))
      .map((s) => {
        const expected = expectedSecondsPerTask(histories.get(s.id)?.tasks ?? []);
        return {
          id: s.id,
          tasks: tasks.get(s.id)!,
          resources: s.resources,
          ...(expected !== undefined ? { expectedSecondsPerTask: expected } : {}),
        };
      }),
  );
}

/** The account's balance from the cluster's balance command (on the site's login node over SSH). */
export async function readBalance(resolved: ResolvedExperiment, executor?: Executor): Promise<Balance> {
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

/**
 * The budget: throws BudgetExceededError (with `shown`, the cost as printed) when the worst case is
 * over `budget.maxBillingUnits` or cannot be counted; the line saying it fits, or none without a budget.
 */
export function checkBudget(
  resolved: ResolvedExperiment,
  estimate: CostEstimate,
  shown: readonly string[],
): string | undefined {
  const budget = resolved.spec.budget;
  if (!budget) return undefined;
  const { unit } = estimate;
  const worst = estimate.worst.units;
  if (worst === null)
    throw new BudgetExceededError(
      `budget: ${budget.maxBillingUnits} ${unit ?? ''} cannot be checked: a partition of this plan has no charging rates\n${shown.join('\n')}`,
    );
  if (worst > budget.maxBillingUnits)
    throw new BudgetExceededError(
      `the plan's worst case, ${formatUnits(worst, unit)}, is over budget.maxBillingUnits = ${budget.maxBillingUnits} ${unit}; nothing was queued.\n` +
        `${shown.join('\n')}\n` +
        `to fit: shorter resources.time, fewer sweep points or tasks, \`train --right-size\` once the stages have history, or a larger budget`,
    );
  return `budget: worst case ${formatUnits(worst, unit)} is within ${budget.maxBillingUnits} ${unit}`;
}

export function costRecord(c: PlanCosting, resolved: ResolvedExperiment): CostRecord {
  const { budget } = resolved.spec;
  return {
    unit: c.estimate.unit,
    source: c.estimate.source,
    worst: c.estimate.worst,
    expected: c.estimate.expected,
    expectedFromHistory: c.estimate.expectedFromHistory,
    stages: Object.fromEntries(
      c.estimate.stages.map((s) => [
        s.id,
        { tasks: s.tasks, worstUnits: s.worst.units, expectedUnits: (s.expected ?? s.worst).units },
      ]),
    ),
    ...(budget ? { budget: budget.maxBillingUnits } : {}),
    balance: c.balance,
  };
}

/**
 * A resubmission of `tasks` task(s) of a stage with `resources` (a recovery) against the spec's
 * budget: its worst case (to its time limit, as `estimatePlanCost` counts), and why it may not be queued
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
  const { budget } = resolved.spec;
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
