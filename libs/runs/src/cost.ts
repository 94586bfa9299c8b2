// Phases 2–3 and the budget guard: right-sizing (new stages, the loaded spec unchanged), what the
// plan will charge and the balance, then the budget (refused over it, before anything is written)
// and the cost printed. The figures are @kdgat/planning's and @kdgat/usage's; the lines are
// cost-lines.ts's.
import {
  checkBudget,
  estimatePlanCost,
  readBalance,
  sizeStages,
  stageHistories,
  withRecordedSizes,
  type RunPlan,
} from '@kdgat/planning';
import { balanceWarning, costLines } from './cost-lines.ts';
import type { Planned, RunOptions, Site, Sized, Spec } from './types.ts';

/**
 * Size: a reproduction keeps the sizes its run applied; history's suggestions are applied with
 * `--right-size` (not to a reproduction). Returns a spec with new stages; `spec` is not changed.
 */
export function size(spec: Spec, site: Site, opts: RunOptions): Sized {
  const { resolved, source } = spec;
  const histories = stageHistories(resolved, site.runsRoot);
  const stages = withRecordedSizes(resolved.stages, source?.rightSized);
  const sizing = sizeStages(resolved, stages, histories, opts.rightSize === true && !source);
  return { spec: { ...spec, resolved: { ...resolved, stages: sizing.stages } }, sizing, histories };
}

/** Cost: what the plan will charge with the requests it will render (worst, expected) and the balance. */
export async function cost(sized: Sized, site: Site, plan: RunPlan): Promise<Planned> {
  const { spec, sizing, histories } = sized;
  const estimate = estimatePlanCost(spec.resolved, spec.resolved.stages, plan, histories);
  const balance = await readBalance(spec.resolved, site.files?.session);
  const rightSized = spec.source?.rightSized ?? sizing.rightSized;
  return {
    plan,
    costing: { estimate, sizing: sizing.suggested, balance },
    ...(rightSized ? { rightSized } : {}),
  };
}

/**
 * Guard, the budget: a plan whose worst case is over `budget.maxBillingUnits` is refused with its
 * cost in the message; otherwise the cost, the sizes and the budget's verdict are printed.
 */
export function guardBudget(sized: Sized, planned: Planned, log: (line: string) => void): void {
  const { resolved } = sized.spec;
  const shown = costLines(resolved, planned.costing, { applied: sized.sizing.rightSized !== undefined });
  const within = checkBudget(resolved, planned.costing.estimate, shown);
  for (const line of [...shown, ...(within ? [within] : []), ...balanceWarning(planned.costing)]) log(line);
}
