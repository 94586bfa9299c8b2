import { describe, expect, it } from 'vitest';
import { clusterPresets } from '../cluster/presets.ts';
import { ClusterProfileSchema } from '../cluster/schema.ts';
import { loadExperimentSpec } from '../load/load.ts';
import { SpecValidationError } from '../errors.ts';
import { SCRIPT_VALUES } from '../script-values.ts';

const spec = (extra: string, cluster = 'local') =>
  [
    'name: budgeted',
    `cluster: ${cluster}`,
    'environment: cpu-local',
    'stages:',
    '  - { id: ae, stage: autoencoder, model: vgae, scale: small, dataset: synth }',
    extra,
    '',
  ].join('\n');

describe('charging rules and budgets', () => {
  it('every OSC partition has rates, with their source', () => {
    for (const name of ['osc-pitzer', 'osc-ascend', 'osc-cardinal'] as const) {
      const p = clusterPresets[name];
      expect(p.charging?.source).toMatch(/osc\.edu/);
      expect(Object.keys(p.charging!.partitions).sort()).toEqual(p.partitions.map((q) => q.name).sort());
    }
  });

  it('refuses rates for a partition the profile does not have, naming it', () => {
    const bad = { ...clusterPresets.local, charging: { ...clusterPresets.local.charging!, partitions: { nope: { coreHour: 1, gpuHour: 1 } } } };
    const r = ClusterProfileSchema.safeParse(bad);
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]!.path).toEqual(['charging', 'partitions', 'nope']);
  });

  it('refuses a billing unit that is not a unit name, in the words of its rule', () => {
    const charging = { ...clusterPresets.local.charging!, unit: '$(id)' };
    const balance = { argv: ['OSCusage', '-P', '{account}'], pattern: '([0-9.]+)', unit: 'US dollars' };
    const r = ClusterProfileSchema.safeParse({ ...clusterPresets.local, charging, balance });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => [i.path, i.message])).toEqual([
      [['charging', 'unit'], SCRIPT_VALUES.billingUnit.expected],
      [['balance', 'unit'], SCRIPT_VALUES.billingUnit.expected],
    ]);
  });

  it('refuses a balance pattern without a capture group', () => {
    const bad = { ...clusterPresets.local, balance: { argv: ['OSCusage'], pattern: 'balance', unit: 'USD' } };
    expect(ClusterProfileSchema.safeParse(bad).success).toBe(false);
  });

  it('accepts budget.maxBillingUnits and rejects a non-positive one with its line', () => {
    expect(loadExperimentSpec({ text: spec('budget: { maxBillingUnits: 50 }'), file: 'b.yaml' }).spec.budget).toEqual({
      maxBillingUnits: 50,
    });
    try {
      loadExperimentSpec({ text: spec('budget: { maxBillingUnits: 0 }'), file: 'b.yaml' });
      expect.unreachable();
    } catch (e) {
      const i = (e as SpecValidationError).issues[0]!;
      expect(i.path).toBe('budget.maxBillingUnits');
      expect(i.line).toBe(6);
    }
  });
});
