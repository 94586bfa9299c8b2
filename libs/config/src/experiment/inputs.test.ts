import { describe, expect, it } from 'vitest';
import { loadPipelineSchema } from '../load/load.ts';
import { stageInputProblems, type CacheIdentity, type EarlierOutput } from './inputs.ts';
import { overrideDefault } from './overrides.ts';

const params = {
  window_size: 100,
  stride: 100,
  val_fraction: 0.1,
  test_fraction: 0.2,
  split_seed: 0,
  max_malformed_fraction: 0.05,
};
const cache: CacheIdentity = { params_digest: 'p'.repeat(64), source_digest: 's'.repeat(64), params };
const earlier = (over: Partial<EarlierOutput> = {}): EarlierOutput => ({
  where: 'run /runs/x/1 stage autoencoder',
  dataset: 'hcrl_sa',
  dir: '/runs/x/1/outputs/hcrl_sa/vgae_large_autoencoder',
  metrics: { status: 'complete', graph_cache: cache },
  modelFile: true,
  ...over,
});
const stage = { id: 'curriculum', dataset: 'hcrl_sa', overrides: {} };
const opts = { currentCache: cache, cacheBuiltHere: false, points: [], pipelineSchema: loadPipelineSchema() };

describe('stageInputProblems', () => {
  it('accepts a finished output made from the same dataset, parameters and files', () => {
    expect(stageInputProblems(stage, earlier(), opts)).toEqual([]);
  });

  it('reads the pipeline defaults of the graph parameters from its schema', () => {
    expect(overrideDefault('data.window_size', loadPipelineSchema())).toBe(100);
    expect(overrideDefault('data.nope', loadPipelineSchema())).toBeUndefined();
  });

  it('refuses another dataset, an unfinished stage, and a model without a cache record', () => {
    expect(stageInputProblems(stage, earlier({ dataset: 'set_01' }), opts)[0]).toMatch(
      /was made from dataset set_01, but stage curriculum reads hcrl_sa/,
    );
    expect(stageInputProblems(stage, earlier({ metrics: { status: 'running' } }), opts)[0]).toMatch(
      /has not finished/,
    );
    expect(stageInputProblems(stage, earlier({ modelFile: false }), opts)[0]).toMatch(/no model\.pt/);
    expect(stageInputProblems(stage, earlier({ metrics: { status: 'complete' } }), opts)[0]).toMatch(
      /does not record the graph cache/,
    );
  });

  it('refuses other graph parameters, in the stage or in a sweep point', () => {
    const other = { ...stage, overrides: { 'data.window_size': 50 } };
    expect(stageInputProblems(other, earlier(), opts)[0]).toMatch(
      /data\.window_size = 100, but stage curriculum uses 50/,
    );
    const swept = stageInputProblems(stage, earlier(), { ...opts, points: [{}, { 'data.stride': 20 }] });
    expect(swept).toHaveLength(1);
    expect(swept[0]).toMatch(/data\.stride = 100, but stage curriculum uses 20 \(sweep point/);
  });

  it('refuses when the cache here was rebuilt from other files or parameters since', () => {
    const changed = { ...cache, source_digest: 't'.repeat(64) };
    expect(stageInputProblems(stage, earlier(), { ...opts, currentCache: changed })[0]).toMatch(
      /other source files of hcrl_sa .*the data set changed since/,
    );
    const rebuilt = { ...cache, params_digest: 'q'.repeat(64) };
    expect(stageInputProblems(stage, earlier(), { ...opts, currentCache: rebuilt })[0]).toMatch(
      /parameter digest/,
    );
  });

  it('needs a cache to check against, unless this run builds it', () => {
    expect(stageInputProblems(stage, earlier(), { ...opts, currentCache: undefined })[0]).toMatch(
      /no graph cache of hcrl_sa .*run a preprocess stage/,
    );
    expect(
      stageInputProblems(stage, earlier(), { ...opts, currentCache: undefined, cacheBuiltHere: true }),
    ).toEqual([]);
  });
});
