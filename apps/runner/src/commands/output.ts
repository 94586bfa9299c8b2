// What train, plan and tune print: the plan's cost, the sizes history suggests and the balance
// before anything is queued; then the run they made: where it is, each job with its dependencies
// and preflight verdict, a reproduction's byte check, and the job ids queued.
import { join } from 'node:path';
import type { ResolvedExperiment } from '@kdgat/config';
import { throttleLines, type PlanCosting, type PredictedStackOutputs } from '@kdgat/planning';
import { formatHours, formatUnits } from '@kdgat/usage';
import { environmentOfStage } from '@kdgat/run-record';
import type { RunResult } from '../pipeline/run.ts';

/**
 * The cost of a plan per stage and in total (worst and expected case), the balance, and the sizes
 * history suggests for each stage (`applied`: with --right-size). `resolved`: with the stages as
 * they will be rendered.
 */
export function costLines(
  resolved: ResolvedExperiment,
  costing: PlanCosting,
  opts: { applied: boolean },
): string[] {
  const { estimate, balance, sizing } = costing;
  const unit = estimate.unit;
  const money = (u: number | null) =>
    unit ? formatUnits(u, unit) : 'no charging rules in the cluster profile';
  const lines = [`cost (${resolved.cluster.name}${estimate.source ? `; ${estimate.source}` : ''}):`];
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
  const { requeue } = resolved;
  if (requeue.enabled && requeue.maxRestarts > 0)
    lines.push(
      `  (requeue may run a task up to ${requeue.maxRestarts} more time(s): at most ${requeue.maxRestarts + 1}x the worst case)`,
    );
  lines.push(
    balance.amount !== null
      ? `  balance: ${balance.amount} ${balance.unit ?? ''} (${balance.note})`
      : `  balance: unknown (${balance.note})`,
  );
  return [...lines, ...sizeLines(resolved, sizing, opts)];
}

/** The sizes history suggests for each stage, and whether they are applied (`--right-size`). */
function sizeLines(
  resolved: ResolvedExperiment,
  sizing: PlanCosting['sizing'],
  opts: { applied: boolean },
): string[] {
  const lines = ['sizes from history (same stage, model, scale and dataset under the runs root):'];
  for (const stage of resolved.stages) {
    const s = sizing[stage.id]!;
    if (!s.cpus && !s.memGB && !s.time) {
      lines.push(`  ${stage.id}: ${s.notes.join('; ')}`);
      continue;
    }
    const applied = opts.applied ? ' (applied: --right-size)' : ' (apply with train --right-size)';
    lines.push(`  ${stage.id}: from ${s.tasks} finished task(s) of ${s.runs} run(s)${applied}`);
    for (const [name, v] of [
      ['cpus', s.cpus],
      ['memGB', s.memGB],
      ['time', s.time],
    ] as const)
      if (v) lines.push(`    ${name}: ${String(v.current)} -> ${String(v.value)}  (${v.basis})`);
    for (const n of s.notes) lines.push(`    note: ${n}`);
  }
  return lines;
}

/** A worst case larger than the account's balance: the warning, or none. */
export function balanceWarning({ estimate, balance }: PlanCosting): string[] {
  const worst = estimate.worst.units;
  return balance.amount !== null && worst !== null && worst > balance.amount
    ? [
        `warning: the worst case (${formatUnits(worst, estimate.unit)}) is more than the balance (${balance.amount} ${balance.unit ?? ''})`,
      ]
    : [];
}

/** `, cluster X (-M X, auto)` for a run placed on one of a site's clusters. */
export function clusterOf(manifest: Pick<RunResult['manifest'], 'placement'>): string {
  const p = manifest.placement;
  return p ? `, cluster ${p.cluster} (${p.via ? `-M ${p.via}, ` : ''}${p.mode})` : '';
}

export function printRun(result: RunResult, opts: { dryRun: boolean }, say: (line: string) => void): void {
  const { manifest } = result;
  say(
    `${opts.dryRun ? 'plan' : 'run'}: ${manifest.experiment} (spec ${manifest.spec.hash.slice(0, 8)}) on stack ${manifest.stack.name}, scheduler ${manifest.scheduler}${clusterOf(manifest)}`,
  );
  const declared = manifest.stack.outputs as Partial<PredictedStackOutputs>;
  if (declared.declared) {
    say(
      `stack ${manifest.stack.name} is NOT provisioned: paths and environments predicted from ${declared.declared.file}; \`train\` needs \`npx nx run infra:up --stack ${manifest.stack.name}\` first`,
    );
    say(`run dir on the site (in the scripts): ${manifest.runDir}`);
    say(`plan written to: ${result.runDir}`);
  } else if (result.runDir !== manifest.runDir)
    say(`run dir: ${manifest.runDir} on the site; local copy: ${result.runDir}`);
  else say(`run dir: ${result.runDir}`);
  for (const line of result.plan.throttle ? throttleLines(result.plan.throttle, result.plan) : []) say(line);
  for (const job of result.plan.jobs) {
    const pre = result.preflight.find((r) => r.job.key === job.key);
    const what = job.tune
      ? `array of ${job.tune.workers} tune workers on study ${result.study?.name ?? ''}`
      : job.shards
        ? job.shards.task
          ? `array of ${job.shards.count} shard tasks (%${job.array?.concurrency ?? job.shards.count})`
          : `join of ${job.shards.count} shards`
        : job.array
          ? `array of ${job.array.size} (%${job.array.concurrency}, points ${job.array.firstPoint}-${job.array.firstPoint + job.array.size - 1})`
          : 'job';
    const corr = new Set(job.aftercorr ?? []);
    const any = new Set(job.afterany ?? []);
    const deps = job.dependsOn.length
      ? ` after ${job.dependsOn.map((k) => (corr.has(k) ? `${k} (task by task)` : any.has(k) ? `${k} drains` : k)).join(', ')}`
      : '';
    const id = manifest.jobs.find((j) => j.key === job.key)?.jobId;
    // A run of several environments says which each job runs in.
    const env = manifest.otherEnvironments?.length
      ? ` in ${environmentOfStage(manifest, job.stageId).name}`
      : '';
    say(
      `  ${job.key}: ${what}${deps}${env} — ${join(result.runDir, job.scriptFile)}${id ? ` — job ${id}` : ''}`,
    );
    if (pre) say(`    preflight: ${pre.message}`);
  }
  if (result.reproduction) {
    const r = result.reproduction;
    say(
      r.identical
        ? `reproduced from ${manifest.submission.reproducedFrom}: re-rendered scripts are byte-identical to the recorded ones`
        : `reproduced from ${manifest.submission.reproducedFrom}: re-rendered scripts DIFFER from the recorded ones: ${r.differing.join(', ')}`,
    );
    if (r.note) say(`  ${r.note}`);
  }
  if (opts.dryRun) say('nothing submitted (plan).');
  else say(`submitted ${manifest.jobs.length} job(s): ${manifest.jobs.map((j) => j.jobId).join(', ')}`);
}
