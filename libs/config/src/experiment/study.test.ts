import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadExperimentSpec, SpecValidationError, validateStudyConfig, type StudyConfig } from '../index.ts';
import { STUDY_SCHEMA_FILE } from './study.ts';

// study.json's contract is Python's (StudyConfig, exported to schema/study.schema.json, read here as
// plain JSON): the spec's tune: section takes its bounds and defaults from it, and what the runner
// writes is checked against it before any worker reads it.
const schema = JSON.parse(readFileSync(STUDY_SCHEMA_FILE, 'utf8')) as {
  properties: Record<string, { maximum?: number; minimum?: number; default?: unknown }>;
};

const spec = (tune: string) => `name: tune-demo
cluster: local
environment: cpu-local
stages:
  - id: ae
    stage: autoencoder
    model: vgae
    scale: small
    dataset: synth
    resources: { cpus: 1, memGB: 2, gpus: { count: 0 }, time: "0:30:00" }
tune:
  objective: { metric: val_loss }
  nTrials: 8
  nWorkers: 2
  space:
    training.lr: { type: float, low: 0.0001, high: 0.1, log: true }
${tune}`;

function issuesOf(text: string): { path: string; expected?: string }[] {
  try {
    loadExperimentSpec({ text, file: 'tune.yaml' });
  } catch (e) {
    if (e instanceof SpecValidationError) return e.issues;
    throw e;
  }
  return [];
}

describe("study.json's schema", () => {
  it('gives the tune: section its defaults and bounds', () => {
    const { resolved } = loadExperimentSpec({ text: spec(''), file: 'tune.yaml' });
    for (const key of ['heartbeatSeconds', 'staleAfterSeconds', 'maxRetries'] as const)
      expect(resolved.tune![key]).toBe(schema.properties[key]!.default);
    for (const key of ['heartbeatSeconds', 'staleAfterSeconds', 'maxRetries']) {
      const max = schema.properties[key]!.maximum!;
      expect(issuesOf(spec(`  ${key}: ${max}\n`)).map((i) => i.path)).not.toContain(`tune.${key}`);
      expect(issuesOf(spec(`  ${key}: ${max + 1}\n`)).map((i) => i.path)).toContain(`tune.${key}`);
    }
  });

  it('accepts the study.json a valid spec makes and refuses one the workers would refuse, naming the field', () => {
    const { resolved } = loadExperimentSpec({ text: spec(''), file: 'tune.yaml' });
    const t = resolved.tune!;
    const config: StudyConfig = {
      study: t.study,
      experiment: 'tune-demo',
      stageId: 'ae',
      stage: 'autoencoder',
      model: 'vgae',
      scale: 'small',
      dataset: 'synth',
      overrides: {},
      space: t.space,
      objective: t.objective,
      nTrials: t.nTrials,
      nWorkers: t.nWorkers,
      pruner: t.pruner,
      sampler: t.sampler,
      heartbeatSeconds: t.heartbeatSeconds,
      staleAfterSeconds: t.staleAfterSeconds,
      maxRetries: t.maxRetries,
      inputsRoot: '/runs/x/outputs',
      runDir: '/runs/x',
    };
    expect(validateStudyConfig(config)).toBe(config);
    expect(() => validateStudyConfig({ ...config, nTrials: 0 })).toThrow(
      /would not be accepted by the tune workers.*nTrials/,
    );
    expect(() => validateStudyConfig({ ...config, model: 'resnet' })).toThrow(/model/);
    expect(() => validateStudyConfig({ ...config, extra: 1 } as StudyConfig)).toThrow(
      /would not be accepted/,
    );
  });
});
