// THE test-only override of the examples suite (examples.test.ts), applied to a copy of each spec,
// never to the files under examples/. It keeps what an example is about (its stages, chain, inputs
// from earlier runs, sweep, study, profiling, staging, requeue, GPU-only settings) and shrinks only
// what this machine cannot or need not afford:
//
//   cluster      -> `local` (one node; the suite submits with --scheduler slurm to the local SLURM);
//                   `account` and spec-level `partition` are dropped (the local SLURM has neither)
//   environment  -> `cpu-local` (the local stack's venv); a stage's own environment -> the box's
//                   second environment, cpu-stage (`stageEnvironment`: its spec file); and `allowFallback: true`: it has no
//                   pylibcugraphops, so `use_cugraph: true` takes the pipeline's CPU fallback (and
//                   `16-mixed` falls back to 32-bit on CPU), which the suite checks in the logs
//   resources    -> 1 cpu, 3 GB, no GPU, 20 minutes, at most 2 array tasks at a time
//   data set     -> `synth` (the synthetic CAN set of the quickstart) for every stage and staging
//   epochs       -> every stage: training.max_epochs 1, data.num_workers 0, training.patience 0, and a
//                   256 MB budget for trial batch sizing on CPU (training.memory_budget_mb)
//   shards       -> at most 4 shard tasks (still an array of shards and a join; synth has 8 recordings)
//   sweep        -> 2 points: the first 2 values of the first grid key and the first of each other
//                   key (a list: its first 2 entries), still one job array per stage
//   tune         -> 2 trials, 1 worker, no pruner (one epoch has nothing to prune); study name made unique
//   profiling    -> at most 3 profiled steps
//   name         -> `<name>-<tag>`, and `inputs: - run: <example name>` follows the rename, so a run
//                   reads the run this suite made (the tag is unique per suite run)
import { resolve } from 'node:path';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

const RESOURCES: Obj = { cpus: 1, memGB: 3, gpus: { count: 0 }, time: '0:20:00' };
const STAGE_OVERRIDES: Obj = {
  'training.max_epochs': 1,
  'data.num_workers': 0,
  'training.patience': 0,
  'training.memory_budget_mb': 256,
};

const obj = (v: Json | undefined): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? v : {});

/** `renames`: example name -> the name its shrunk copy runs under (for `inputs`). */
export function shrinkForTest(
  spec: Obj,
  tag: string,
  renames: ReadonlyMap<string, string>,
  /** The spec file of the site's second environment, for stages that name their own. */
  stageEnvironment = 'cpu-local',
  /** The examples folder: a declared pipeline's files are named relative to it. */
  examplesDir = '.',
): Obj {
  const s = structuredClone(spec);
  s['name'] = renames.get(String(s['name'])) ?? `${String(s['name'])}-${tag}`;
  s['cluster'] = 'local';
  // A researcher's own pipeline keeps its own environment (the site declares it) and its own
  // overrides (kdgat's below mean nothing to it); its files are found from the shrunk copy's folder.
  const declared = typeof s['pipeline'] === 'string' && s['pipeline'] !== 'kdgat';
  if (declared) {
    s['pipeline'] = resolve(examplesDir, String(s['pipeline']));
    s['environment'] = resolve(examplesDir, String(s['environment']));
  } else s['environment'] = 'cpu-local';
  s['allowFallback'] = true;
  delete s['account'];
  delete s['partition'];
  const stages = (s['stages'] as Obj[] | undefined) ?? [];
  for (const st of stages) {
    st['dataset'] = 'synth';
    if (typeof st['environment'] === 'string') st['environment'] = stageEnvironment;
    const concurrency = obj(st['resources'])['arrayConcurrency'];
    st['resources'] = {
      ...RESOURCES,
      ...(typeof concurrency === 'number' ? { arrayConcurrency: Math.min(concurrency, 2) } : {}),
    };
    if (typeof st['shards'] === 'number') st['shards'] = Math.min(st['shards'], 4);
    if (!declared) st['overrides'] = { ...obj(st['overrides']), ...STAGE_OVERRIDES };
    for (const input of (st['inputs'] as Obj[] | undefined) ?? []) {
      const renamed = renames.get(String(input['run']));
      if (renamed) input['run'] = renamed;
    }
  }
  const staging = obj(s['staging']);
  if (Array.isArray(staging['datasets'])) staging['datasets'] = staging['datasets'].length ? ['synth'] : [];
  const sweep = obj(s['sweep']);
  if (s['sweep']) {
    const grid = obj(sweep['grid']);
    Object.keys(grid).forEach((k, i) => (grid[k] = (grid[k] as Json[]).slice(0, i === 0 ? 2 : 1)));
    if (Array.isArray(sweep['list']))
      sweep['list'] = sweep['list'].slice(0, Object.keys(grid).length ? 0 : 2);
    if (Array.isArray(sweep['list']) && sweep['list'].length === 0) delete sweep['list'];
  }
  if (s['profiling']) {
    const p = obj(s['profiling']);
    if (typeof p['steps'] === 'number') p['steps'] = Math.min(p['steps'], 3);
  }
  if (s['tune']) {
    const t = obj(s['tune']);
    t['nTrials'] = 2;
    t['nWorkers'] = 1;
    t['study'] = `${String(t['study'] ?? spec['name'])}-${tag}`;
    t['pruner'] = { type: 'none' }; // one epoch: nothing to prune
  }
  return s;
}
