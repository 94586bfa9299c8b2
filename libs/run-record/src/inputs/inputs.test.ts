import { mkdirSync, mkdtempSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadExperimentSpec } from '@kdgat/config';
import { describe, expect, it } from 'vitest';
import { MANIFEST_VERSION } from '../manifest.ts';
import type { StackOutputs } from '@kdgat/planning';
import { linkStageInputs, resolveStageInputs, StageInputError } from './inputs.ts';

const graphCache = {
  params_digest: 'a'.repeat(64),
  source_digest: 'b'.repeat(64),
  params: {
    window_size: 100,
    stride: 100,
    val_fraction: 0.1,
    test_fraction: 0.2,
    split_seed: 0,
    max_malformed_fraction: 0.05,
  },
};

/** A runs dir with one finished run of experiment `base` (an autoencoder) and the cache it used. */
function site(): { stack: StackOutputs; runDir: string; out: string } {
  const root = mkdtempSync(join(tmpdir(), 'inputs-'));
  const runsDir = join(root, 'runs');
  const runDir = join(runsDir, 'base', '20260101T000000Z-abcdef12');
  const out = join(runDir, 'outputs', 'synth', 'vgae_small_autoencoder');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'model.pt'), 'model');
  writeFileSync(join(out, 'metrics.json'), JSON.stringify({ status: 'complete', graph_cache: graphCache }));
  writeFileSync(
    join(runDir, 'manifest.json'),
    JSON.stringify({
      version: MANIFEST_VERSION,
      runDir,
      resolved: {
        stages: [{ id: 'ae', stage: 'autoencoder', model: 'vgae', scale: 'small', dataset: 'synth' }],
      },
      jobs: [{ key: 'ae', stageId: 'ae', runRoot: join(runDir, 'outputs') }],
    }),
  );
  const cache = join(root, 'cache', 'synth');
  mkdirSync(cache, { recursive: true });
  writeFileSync(join(cache, 'meta.json'), JSON.stringify(graphCache));
  const stack = {
    scratch: { root, cacheDirs: { synth: cache }, runsDir, logsDir: join(root, 'logs') },
  } as unknown as StackOutputs;
  return { stack, runDir, out };
}

const spec = (input: string, extra = '') =>
  loadExperimentSpec({
    text: `name: next
cluster: local
environment: cpu-local
stages:
  - id: curriculum
    stage: curriculum
    model: gat
    scale: small
    dataset: synth
    inputs:
      - run: ${input}
        stage: ae
${extra}`,
  }).resolved;

describe('stage inputs from earlier runs', () => {
  it('finds the latest finished run of an experiment, records it and links its outputs in', () => {
    const { stack, runDir, out } = site();
    const [input, ...rest] = resolveStageInputs(spec('base'), stack);
    expect(rest).toEqual([]);
    expect(input).toMatchObject({
      stageId: 'curriculum',
      run: 'base',
      runDir,
      stage: 'ae',
      dir: out,
      graphCache,
    });
    expect(input!.linkedAs).toEqual(['outputs/synth/vgae_small_autoencoder']);
    const newRun = mkdtempSync(join(tmpdir(), 'new-run-'));
    linkStageInputs(newRun, [input!]);
    expect(readlinkSync(join(newRun, 'outputs/synth/vgae_small_autoencoder'))).toBe(out);
  });

  it('names a run by its directory or manifest.json, and links into every sweep point', () => {
    const { stack, runDir } = site();
    const sweep = 'sweep:\n  grid:\n    training.lr: [0.1, 0.01]\n';
    const [input] = resolveStageInputs(spec(`${runDir}/manifest.json`, sweep), stack);
    expect(input!.linkedAs).toEqual([
      'outputs/point_0/synth/vgae_small_autoencoder',
      'outputs/point_1/synth/vgae_small_autoencoder',
    ]);
  });

  it('refuses, before anything is queued, outputs made from other graph parameters or a missing run', () => {
    const { stack } = site();
    const other = spec('base', 'overrides:\n  data.window_size: 50\n');
    expect(() => resolveStageInputs(other, stack)).toThrow(StageInputError);
    expect(() => resolveStageInputs(other, stack)).toThrow(
      /data\.window_size = 100, but stage curriculum uses 50/,
    );
    expect(() => resolveStageInputs(spec('nobody'), stack)).toThrow(/no run of experiment nobody in/);
  });
});
