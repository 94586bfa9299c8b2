// A stage may run in an environment of its own (`stages[].environment`): preprocessing on a CPU
// environment, training on the experiment's GPU one. Each is loaded and checked like the
// experiment's, and the rules that depend on an environment see the stage's.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadExperimentSpec, SpecValidationError } from '../index.ts';

const SPEC = `name: two-envs
cluster: osc-pitzer
account: PAS1266
environment: gnn-rapids
stages:
  - id: prep
    stage: preprocess
    model: gat
    scale: large
    dataset: hcrl_sa
    environment: gnn-cpu
    resources: { cpus: 8, memGB: 32, gpus: { count: 0 }, time: "2:00:00", partition: cpu }
  - id: train
    stage: curriculum
    model: gat
    scale: large
    dataset: hcrl_sa
    dependsOn: [prep]
    resources: { cpus: 8, memGB: 85, gpus: { count: 1, type: v100 }, time: "4:00:00", partition: gpu }
`;

function issuesOf(text: string, dir = mkdtempSync(join(tmpdir(), 'kdgat-stage-env-'))) {
  try {
    loadExperimentSpec({ text, file: join(dir, 'spec.yaml') });
  } catch (e) {
    expect(e).toBeInstanceOf(SpecValidationError);
    return (e as SpecValidationError).issues;
  }
  throw new Error('the spec was accepted');
}

describe('stages[].environment', () => {
  it('resolves each stage to its environment, every one of them by name', () => {
    const { resolved } = loadExperimentSpec({ text: SPEC });
    expect(resolved.stages.map((s) => [s.id, s.environment])).toEqual([
      ['prep', 'gnn-cpu'],
      ['train', 'gnn-rapids'],
    ]);
    expect(Object.keys(resolved.environments).sort()).toEqual(['gnn-cpu', 'gnn-rapids']);
    expect(resolved.environment.name).toBe('gnn-rapids');
  });

  it('refuses an environment that is neither a preset nor a file, at the stage field', () => {
    const issues = issuesOf(SPEC.replace('environment: gnn-cpu', 'environment: gnn-nope'));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ line: 11 });
    expect(issues[0]!.message).toMatch(/gnn-nope/);
  });

  it("checks the GPU rules and cuGraph against the stage's own environment", () => {
    // cuGraph on the CPU environment is refused at that stage's override, not the other's
    const cugraph = SPEC.replace(
      '    environment: gnn-cpu\n',
      '    environment: gnn-cpu\n    overrides:\n      gat.use_cugraph: true\n',
    );
    const issues = issuesOf(cugraph);
    expect(issues.map((i) => i.message)).toEqual([
      expect.stringContaining('which environment gnn-cpu does not have'),
    ]);
    // and accepted where the stage runs in gnn-rapids-cugraphops
    const fused = cugraph.replace('environment: gnn-cpu', 'environment: gnn-rapids-cugraphops');
    expect(loadExperimentSpec({ text: fused }).resolved.stages[0]!.environment).toBe('gnn-rapids-cugraphops');
  });

  it('refuses two different environments under one name', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kdgat-stage-env-'));
    writeFileSync(
      join(dir, 'mine.yaml'),
      'name: gnn-rapids\nbackend: venv\npython: "3.12"\nrequirements: [optuna==4.1.0]\n',
    );
    const issues = issuesOf(SPEC.replace('environment: gnn-cpu', 'environment: ./mine.yaml'), dir);
    expect(issues.map((i) => i.message)).toEqual([expect.stringContaining('one name, one environment')]);
  });
});
