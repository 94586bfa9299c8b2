import { describe, expect, it } from 'vitest';
import { loadExperimentSpec, SpecValidationError, type SpecIssue } from '../index.ts';

const BASE = `name: tune-demo
cluster: local
environment: cpu-local
stages:
  - id: ae
    stage: autoencoder
    model: vgae
    scale: small
    dataset: synth
    overrides:
      training.max_epochs: 12
    resources: { cpus: 1, memGB: 2, gpus: { count: 0 }, time: "0:30:00" }
`;

const TUNE = `tune:
  objective: { metric: val_loss }
  nTrials: 8
  nWorkers: 2
  space:
    training.lr: { type: float, low: 0.0001, high: 0.1, log: true }
    vgae.latent_dim: { type: int, low: 8, high: 32, step: 8 }
    vgae.dropout: { type: categorical, choices: [0.0, 0.2] }
`;

const load = (text: string) => loadExperimentSpec({ text, file: 'tune.yaml' });

function issuesOf(text: string): SpecIssue[] {
  try {
    load(text);
  } catch (e) {
    if (e instanceof SpecValidationError) return e.issues;
    throw e;
  }
  throw new Error('expected the spec to be rejected');
}

describe('tune section', () => {
  it("resolves with the plan's pruner (Hyperband 3/100/3 in PatientPruner(4)) and TPE by default", () => {
    const { resolved, warnings } = load(BASE + TUNE);
    expect(resolved.tune).toMatchObject({
      stage: 'ae',
      study: 'tune-demo',
      objective: { metric: 'val_loss', direction: 'minimize' },
      nTrials: 8,
      nWorkers: 2,
      pruner: { type: 'hyperband', minResource: 3, maxResource: 100, reductionFactor: 3, patient: { patience: 4 } },
      sampler: { type: 'tpe' },
      heartbeatSeconds: 60,
      staleAfterSeconds: 300,
      maxRetries: 1,
    });
    // max_epochs 12 < maxResource 100: said, not refused.
    expect(warnings.join('\n')).toMatch(/maxResource is 100 epochs but trials stop after training.max_epochs=12/);
  });

  it('rejects an unknown search-space key, naming it and the nearest real key', () => {
    const issues = issuesOf(BASE + TUNE.replace('training.lr:', 'training.lrr:'));
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path).toBe('tune.space.training.lrr');
    expect(issues[0]!.message).toMatch(/unknown pipeline config key `training.lrr`.*training\.lr/);
    expect(issues[0]!.line).toBe(18); // the key's own line in the YAML
  });

  it('rejects empty ranges and a log range through zero', () => {
    const issues = issuesOf(
      BASE +
        TUNE.replace('low: 0.0001, high: 0.1, log: true', 'low: 0.1, high: 0.1').replace(
          'low: 8, high: 32',
          'low: 32, high: 8',
        ),
    );
    expect(issues.map((i) => i.path)).toEqual(['tune.space.training.lr.high', 'tune.space.vgae.latent_dim.high']);
    expect(issues[0]!.message).toMatch(/range \[0.1, 0.1\] is empty/);
    expect(issuesOf(BASE + TUNE.replace('low: 0.0001', 'low: 0'))[0]).toMatchObject({
      path: 'tune.space.training.lr.low',
      message: 'a log-scale range needs low > 0',
    });
  });

  it('rejects a value type the key does not take: float on an integer key, a bad categorical choice', () => {
    const issues = issuesOf(
      BASE +
        TUNE.replace('{ type: int, low: 8, high: 32, step: 8 }', '{ type: float, low: 8, high: 32 }').replace(
          'choices: [0.0, 0.2]',
          'choices: [0.0, "high"]',
        ),
    );
    expect(issues.map((i) => [i.path, i.message])).toEqual([
      ['tune.space.vgae.latent_dim.type', 'vgae.latent_dim takes whole numbers: use type: int'],
      ['tune.space.vgae.dropout.choices.1', 'vgae.dropout = "high" is not valid for the pipeline'],
    ]);
  });

  it('rejects a Hyperband pruner with minResource > maxResource', () => {
    const issues = issuesOf(
      `${BASE}${TUNE}  pruner: { type: hyperband, minResource: 10, maxResource: 5, reductionFactor: 3 }\n`,
    );
    expect(issues).toEqual([
      expect.objectContaining({
        path: 'tune.pruner.minResource',
        message: 'minResource 10 is above maxResource 5',
        expected: '<= 5',
        found: '10',
      }),
    ]);
  });

  it('rejects a metric the stage does not log, a non-training stage, more workers than trials, and sweep + tune', () => {
    const pre = BASE.replace('stage: autoencoder', 'stage: preprocess');
    expect(issuesOf(pre + TUNE).map((i) => i.path)).toContain('tune.stage');
    expect(issuesOf(BASE + TUNE.replace('metric: val_loss', 'metric: val_acc'))[0]).toMatchObject({
      path: 'tune.objective.metric',
      expected: 'one of val_loss',
    });
    expect(issuesOf(BASE + TUNE.replace('nWorkers: 2', 'nWorkers: 9'))[0]!.path).toBe('tune.nWorkers');
    expect(issuesOf(`${BASE}${TUNE}sweep:\n  grid:\n    training.seed: [0, 1]\n`)[0]!.path).toBe('sweep');
  });

  it('rejects a stage that depends on the tuned stage (a study has no single output)', () => {
    const chained = `${BASE}  - id: cls
    stage: curriculum
    model: gat
    scale: small
    dataset: synth
    dependsOn: [ae]
${TUNE}  stage: ae
`;
    expect(issuesOf(chained)[0]!.message).toMatch(/cls depend on the tuned stage ae.*train --from-study tune-demo --best/);
  });

  it('rejects a heartbeat that cannot tell a live worker from a dead one', () => {
    expect(issuesOf(`${BASE}${TUNE}  heartbeatSeconds: 30\n  staleAfterSeconds: 45\n`)[0]).toMatchObject({
      path: 'tune.staleAfterSeconds',
      expected: '> 60 (twice heartbeatSeconds)',
    });
  });
});
