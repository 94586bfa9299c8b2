import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadExperimentSpec } from '../load/load.ts';
import { Stage } from '../experiment/primitives.ts';
import { DEFAULT_PIPELINE_DECLARATION } from '../pipeline/pipeline.ts';
import { LOCAL_SPEC } from '../test-support/specs.ts';
import {
  CATALOGUE_DIR,
  RUN_CONTRACT_FILE,
  STAGE_METRICS,
  parseRunContract,
  runDirPath,
} from './run-contract.ts';

// The TypeScript side uses the run contract (python/src/kdgat/contract/run_contract.json), read here
// as plain JSON so a loader that drifts from the file fails too.
const text = readFileSync(RUN_CONTRACT_FILE, 'utf8');
const file = JSON.parse(text) as {
  requeue: { defaultSignal: string };
  runDir: { layout: string };
  stages: { name: string; epochMetrics: string[] }[];
  catalogue: { dir: string; columns: { name: string }[] };
};
const experimentSchema = JSON.parse(
  readFileSync(new URL('../../schema/experiment.schema.json', import.meta.url), 'utf8'),
) as {
  properties: { stages: { items: { properties: { stage: { enum: string[] } } } } };
};

describe('run contract', () => {
  it("the stage enum is the file's stage list, in order, here and in the kdgat pipeline declaration", () => {
    const names = file.stages.map((s) => s.name);
    expect(Stage.options).toEqual(names);
    expect(DEFAULT_PIPELINE_DECLARATION.stages).toEqual(names);
    // The editor schema takes any stage name: a spec's pipeline says which (checked at load).
    expect(experimentSchema.properties.stages.items.properties.stage.enum).toBeUndefined();
  });

  it('tune objectives are checked against the metrics the file says each stage logs', () => {
    const training = file.stages.filter((s) => s.epochMetrics.length > 0);
    expect(STAGE_METRICS).toEqual(Object.fromEntries(training.map((s) => [s.name, s.epochMetrics])));
  });

  it("run dirs follow the file's layout", () => {
    const run = { dataset: 'hcrl_sa', model: 'gat', scale: 'large', stage: 'curriculum' };
    const want = file.runDir.layout
      .replace('<run-root>/', '')
      .replace('<dataset>', run.dataset)
      .replace('<model>', run.model)
      .replace('<scale>', run.scale)
      .replace('<stage>', run.stage);
    expect(runDirPath(run)).toBe(want);
  });

  it("the catalogue's folder is the file's, and its columns are unique names", () => {
    expect(CATALOGUE_DIR).toBe(file.catalogue.dir);
    const names = file.catalogue.columns.map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it("a spec without a requeue signal gets the file's default", () => {
    const { spec } = loadExperimentSpec({ text: LOCAL_SPEC, file: 'exp.yaml' });
    expect(spec.requeue.signal).toBe(file.requeue.defaultSignal);
  });

  it('a broken contract is refused, naming the file and the field', () => {
    const bad = JSON.parse(text) as { requeue: { exitStatus: number } };
    bad.requeue.exitStatus = 300;
    expect(() => parseRunContract(JSON.stringify(bad), 'run_contract.json')).toThrow(
      /run_contract\.json is not a valid run contract: requeue\.exitStatus: /,
    );
  });
});
