// What plan/train print of a plan's cost: the billed cores of a DDP job (tasks x cpus per node).
import { loadExperimentSpec } from '@kdgat/config';
import { buildPlan, estimatePlanCost, sizeStages, type PlanCosting } from '@kdgat/planning';
import { ddpCostSpec } from '@kdgat/planning/testing';
import { describe, expect, it } from 'vitest';
import { balanceWarning, costLines } from './cost-lines.ts';

const DDP_SPEC = ddpCostSpec('gpu-quad');

describe('costLines of a 2-task job', () => {
  it('says the billed cores per task, the tasks per node, and that there is no history', () => {
    const { resolved } = loadExperimentSpec({ text: DDP_SPEC, file: 'ddp.yaml' });
    const plan = buildPlan({
      experiment: resolved.spec.name,
      specHash: resolved.specHash,
      stages: resolved.stages,
      sweepPoints: resolved.sweepPoints,
      maxArraySize: 1001,
    });
    const none = new Map();
    const sizing = sizeStages(resolved, resolved.stages, none, false);
    const costing: PlanCosting = {
      estimate: estimatePlanCost(resolved, sizing.stages, plan, none),
      sizing: sizing.suggested,
      balance: { amount: 1, unit: 'USD', note: 'from `balance`' },
    };
    const lines = costLines(resolved, costing, { applied: false });
    // 13 cores x 8 h = 104 core-h x $0.003 + 2 GPUs x 8 h = 16 GPU-h x $0.09 = $1.75
    expect(lines).toContain(
      '  teacher: 1 task(s) x 13 billed core(s) (2 tasks x 6 cpus, 200 GB per node) + 2 GPU(s) on gpu-quad; ' +
        'worst (to the time limit) 16.00 GPU-h, 104 core-h, 1.75 USD; expected: no history (counted at the limit)',
    );
    expect(lines).toContain('  balance: 1 USD (from `balance`)');
    expect(balanceWarning(costing)).toEqual([
      'warning: the worst case (1.75 USD) is more than the balance (1 USD)',
    ]);
  });
});
