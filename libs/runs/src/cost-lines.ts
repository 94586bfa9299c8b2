// What a plan will charge, as the guard phase prints it before anything is queued: the cost per
// stage and in total (worst and expected case), the balance, the sizes history suggests, and a
// worst case over the balance. The figures are @kdgat/planning's and @kdgat/usage's.
import type { ResolvedExperiment } from '@kdgat/config';
import type { PlanCosting } from '@kdgat/planning';
import { formatHours, formatUnits } from '@kdgat/usage';

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
