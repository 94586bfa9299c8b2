// Chunked sweeps that chain: on a private SLURM with MaxArraySize=3, a 7-point sweep of two stages
// becomes 3 chunks each; chunk k of the second stage waits task by task (aftercorr) on chunk k of
// the first and finds its outputs under the same `outputs/point_<i>`. One point fails in the first
// stage: only that point's second-stage task is cancelled, the other six run. The catalogue holds a
// row for each task that ran, the failed one written by its epilog.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readManifest } from '@kdgat/run-record';
import { PIPELINE_VENV, makeSite, runDirOf, type Site } from './harness.ts';
import { startOwnSlurm, type OwnSlurm } from './own-slurm.ts';
import { specYaml } from './specs.ts';

const FAILING_SEED = 4;

describe('a chunked sweep chain on a SLURM with MaxArraySize=3', () => {
  let slurm: OwnSlurm | undefined;
  let site: Site;
  beforeAll(async () => {
    slurm = await startOwnSlurm({ maxArraySize: 3 });
    site = makeSite({ pipelineVenv: true }); // the real catalogue (pyarrow) writes the rows
    Object.assign(site.env, {
      SLURM_CONF: slurm.conf,
      HPC_STANDIN_EPOCH_SECONDS: '0.1',
      HPC_STANDIN_REQUIRE_INPUTS: '1',
      HPC_STANDIN_FAIL_IF: `training.seed=${FAILING_SEED}`,
    });
  }, 200_000);
  afterAll(() => slurm?.stop(), 90_000);

  it('keeps the other points running when one fails, each reading its own point', async () => {
    const spec = site.spec(
      'chunks',
      specYaml({
        name: 'e2e-chunks',
        stages: [
          { id: 'a', stage: 'autoencoder', model: 'vgae', overrides: { 'training.max_epochs': 1 } },
          { id: 'b', stage: 'curriculum', dependsOn: ['a'], overrides: { 'training.max_epochs': 1 } },
        ],
        sweep: { 'training.seed': [0, 1, 2, 3, 4, 5, 6] },
        arrayConcurrency: 3,
      }),
    );
    const r = await site.cli(['train', ...site.specArgs(spec), '--wait'], { timeoutMs: 400_000 });
    expect(r.code, `${r.out}\n${r.err}`).not.toBe(0); // one point failed
    const runDir = runDirOf(r.out);
    const m = readManifest(runDir);
    expect(m.jobs.map((j) => j.key)).toEqual([
      'a.chunk0',
      'a.chunk1',
      'a.chunk2',
      'b.chunk0',
      'b.chunk1',
      'b.chunk2',
    ]);
    expect(m.jobs.map((j) => j.array?.size)).toEqual([3, 3, 1, 3, 3, 1]);
    for (const k of [0, 1, 2]) {
      expect(m.jobs.find((j) => j.key === `b.chunk${k}`)!.aftercorr).toEqual([`a.chunk${k}`]);
    }
    // Every chunk writes under the run's one outputs/, at the point's global index.
    expect(new Set(m.jobs.map((j) => j.runRoot))).toEqual(new Set([join(runDir, 'outputs')]));

    const ran = (point: number, dir: string) =>
      existsSync(join(runDir, 'outputs', `point_${point}`, 'synth', dir, 'metrics.json'));
    for (let p = 0; p < 7; p++) {
      expect(ran(p, 'vgae_small_autoencoder'), `a of point ${p}`).toBe(p !== FAILING_SEED);
      expect(ran(p, 'gat_small_curriculum'), `b of point ${p}`).toBe(p !== FAILING_SEED);
    }
    const b = JSON.parse(
      readFileSync(
        join(runDir, 'outputs', 'point_6', 'synth', 'gat_small_curriculum', 'metrics.json'),
        'utf8',
      ),
    ) as { overrides: Record<string, string> };
    expect(b.overrides['training.seed']).toBe('6');

    // The states SLURM reports: point 4 failed in a; its b task never ran, the others completed.
    const s = await site.cli(['status', runDir, '--json']);
    expect(s.code, s.err).toBe(0);
    const jobs = JSON.parse(s.out) as { key: string; tasks: { arrayIndex?: number; state: string }[] }[];
    const stateOf = (key: string, index: number) =>
      jobs.find((j) => j.key === key)!.tasks.find((t) => t.arrayIndex === index)?.state;
    expect(stateOf('a.chunk1', 1)).toBe('FAILED'); // point 4 = chunk 1, task 1
    expect(stateOf('b.chunk1', 1)).not.toBe('COMPLETED');
    for (const [key, index] of [
      ['b.chunk0', 0],
      ['b.chunk0', 2],
      ['b.chunk1', 0],
      ['b.chunk1', 2],
      ['b.chunk2', 0],
    ] as const)
      expect(stateOf(key, index), `${key}_${index}`).toBe('COMPLETED');

    // The catalogue: a row per task that ran (b of point 4 never did): the failed one written by the
    // job's epilog (the stand-in exits without one, as a killed pipeline would), the others by the stage.
    const runs = await site.cli(
      [
        'runs',
        '--stack-outputs',
        site.stackFile,
        '--json',
        '--where',
        `run_id=${basename(runDir)}`,
        '--sort',
        'stage_id,point_index',
      ],
      { env: { ...site.env, HPC_PYTHON: join(PIPELINE_VENV, 'bin', 'python'), PYTHONPATH: '' } },
    );
    expect(runs.code, runs.err).toBe(0);
    const rows = (
      JSON.parse(runs.out) as { stage_id: string; point_index: number; state: string; recorded_by: string }[]
    ).map((r) => `${r.stage_id}${r.point_index} ${r.state} ${r.recorded_by}`);
    const points = [0, 1, 2, 3, 4, 5, 6];
    expect(rows).toEqual([
      ...points.map((p) => (p === FAILING_SEED ? `a${p} FAILED epilog` : `a${p} COMPLETED pipeline`)),
      ...points.filter((p) => p !== FAILING_SEED).map((p) => `b${p} COMPLETED pipeline`),
    ]);
  });
});
