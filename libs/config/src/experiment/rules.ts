// The rules a spec is resolved with (resolveExperiment in resolve.ts calls them in this order): the
// partition and the account, the stage order, each stage's resources against its partition (GPUs,
// memory, cpus x tasks, time, how memory is billed), its GPUs against the environment and its shards, then the
// overrides and sweep points against the pipeline's schema, cuGraph, and the budget. Each returns
// its problems (or warnings) with their field paths.
import type { ClusterProfile, Partition } from '../cluster/schema.ts';
import { cudaSupportsGpu, hasCugraphOps, rapidsSupportsGpu } from '../environment/rules.ts';
import type { EnvironmentSpec } from '../environment/schema.ts';
import { parseSlurmTime } from '../time.ts';
import { requirementProblems, validateOverrides } from './overrides.ts';
import { DEFAULT_PIPELINE_NAME, isDefaultPipeline, type Pipeline } from '../pipeline/pipeline.ts';
import type { Problem, ResolvedStage, Resources } from './resolve.ts';
import type { ExperimentSpec, Scalar } from './schema.ts';

/** One stage as its rules read it: as the spec wrote it, where it is, and what it resolved to. */
export interface StageView {
  written: ExperimentSpec['stages'][number];
  index: number;
  partition: Partition;
  resources: Resources;
}

/** A major.minor version (the environment's CUDA, its RAPIDS line). */
type Line = { major: number; minor: number };

const stagePath = (index: number, ...rest: (string | number)[]) => ['stages', index, ...rest];

/** Partition: the name is one of the cluster's partitions. */
export function partitionProblems(
  cluster: ClusterProfile,
  name: string,
  path: (string | number)[],
): Problem[] {
  if (cluster.partitions.some((q) => q.name === name)) return [];
  return [
    {
      path,
      message: `partition "${name}" does not exist on ${cluster.name}`,
      expected: `one of ${cluster.partitions.map((p) => p.name).join(', ')}`,
      found: JSON.stringify(name),
    },
  ];
}

/** Account: a cluster that requires --account gets one. */
export function accountProblems(cluster: ClusterProfile, account: string | undefined): Problem[] {
  if (!cluster.accountRequired || account) return [];
  return [
    {
      path: ['account'],
      message: `${cluster.name} requires --account on every job: add \`account: <your project, e.g. PAS1266>\``,
      expected: 'a SLURM account',
      found: 'nothing',
    },
  ];
}

/** Stage order: ids are unique, and a stage depends only on earlier stages. */
export function stageOrderProblems(stages: ExperimentSpec['stages'], index: number): Problem[] {
  const s = stages[index]!;
  const ids = new Set(stages.slice(0, index).map((earlier) => earlier.id));
  const out: Problem[] = [];
  if (ids.has(s.id)) out.push({ path: stagePath(index, 'id'), message: `stage id "${s.id}" is used twice` });
  s.dependsOn.forEach((d, j) => {
    if (!ids.has(d))
      out.push({
        path: stagePath(index, 'dependsOn', j),
        message: `"${d}" is not an earlier stage of this spec`,
        expected: ids.size ? `one of ${[...ids].join(', ')}` : 'no dependencies for the first stage',
        found: JSON.stringify(d),
      });
  });
  return out;
}

/**
 * A stage's `env` may not set what its pipeline's job sets itself: the staged caches' root and the
 * raw-data variable (the stack's datasets set that one).
 */
export function stageEnvProblems(
  env: Record<string, string> | undefined,
  pipeline: Pick<Pipeline, 'name' | 'cacheRootVariable' | 'rawData'>,
  index: number,
): Problem[] {
  const owned: [string | undefined, string][] = [
    [pipeline.cacheRootVariable, "the job exports it as the staged caches' root"],
    [
      pipeline.rawData?.variable,
      "it is the pipeline's raw-data variable, set from the stack's datasets (kdgat-hpc:rawDataRoot or datasets[].raw)",
    ],
  ];
  return Object.entries(env ?? {}).flatMap(([name, value]) => {
    const hit = owned.find(([n]) => n === name);
    return hit
      ? [
          {
            path: stagePath(index, 'env', name),
            message: `${name} cannot be set by a stage of pipeline ${pipeline.name}: ${hit[1]}`,
            expected: `no env.${name}`,
            found: JSON.stringify(value),
          },
        ]
      : [];
  });
}

/**
 * Shards: only the default pipeline's preprocess stage can be spread over an array (its tasks
 * write the shard ledger its join reads), and not inside a sweep (every point would build the same shards).
 */
export function shardProblems(
  { written, index }: StageView,
  pipeline: Pipeline,
  hasSweep: boolean,
): Problem[] {
  if (written.shards === undefined) return [];
  const path = stagePath(index, 'shards');
  const found = String(written.shards);
  if (!isDefaultPipeline(pipeline))
    return [
      {
        path,
        message: `sharding is ${DEFAULT_PIPELINE_NAME}'s preprocess (its tasks write a shard ledger that its join reads): pipeline ${pipeline.name} declares no shards`,
        expected: 'no shards:',
        found,
      },
    ];
  if (written.stage !== 'preprocess')
    return [
      {
        path,
        message: `only a preprocess stage can be sharded (its recordings are split across the array's tasks); stage ${written.id} is ${written.stage}`,
        expected: 'no shards: on this stage',
        found,
      },
    ];
  if (hasSweep)
    return [
      {
        path,
        message:
          'a sharded stage cannot be part of a sweep (every point would build the same shards): preprocess in a spec of its own, then read its cache',
        expected: 'no sweep: in this spec, or no shards:',
        found,
      },
    ];
  return [];
}

/** GPUs: as many per node as the partition has, of its type. */
export function gpuProblems({ written, index, partition, resources }: StageView): Problem[] {
  const gpuCount = resources.gpus.count;
  const asked = written.resources.gpus?.type;
  const out: Problem[] = [];
  if (gpuCount > partition.gpusPerNode)
    out.push({
      path: stagePath(index, 'resources', 'gpus', 'count'),
      message: `${gpuCount} GPUs per node do not fit partition ${partition.name} (${partition.gpusPerNode} per node)`,
      expected: `<= ${partition.gpusPerNode}`,
      found: String(gpuCount),
    });
  if (gpuCount > 0 && asked && partition.gpuType && asked !== partition.gpuType)
    out.push({
      path: stagePath(index, 'resources', 'gpus', 'type'),
      message: `partition ${partition.name} has ${partition.gpuType} GPUs, not ${asked}`,
      expected: partition.gpuType,
      found: asked,
    });
  return out;
}

/** Memory: fits a node of the partition. */
export function memoryProblems({ index, partition, resources }: StageView): Problem[] {
  if (resources.memGB <= partition.memPerNodeGB) return [];
  return [
    {
      path: stagePath(index, 'resources', 'memGB'),
      message: `${resources.memGB} GB does not fit a node of ${partition.name} (${partition.memPerNodeGB} GB usable)`,
      expected: `<= ${partition.memPerNodeGB}`,
      found: String(resources.memGB),
    },
  ];
}

/** CPUs x tasks: `cpus` is per task (--cpus-per-task), so a node holds cpus x tasks per node cores. */
export function coreProblems({ written, index, partition, resources }: StageView): Problem[] {
  const coresPerNode = resources.cpus * resources.ntasksPerNode;
  if (coresPerNode <= partition.coresPerNode) return [];
  const r = written.resources;
  const tasks = resources.ntasksPerNode;
  return [
    {
      // The field the spec wrote (cpus, else the task count that multiplies the default cpus).
      path: stagePath(
        index,
        'resources',
        r.cpus === undefined && r.ntasksPerNode !== undefined ? 'ntasksPerNode' : 'cpus',
      ),
      message:
        tasks === 1
          ? `${resources.cpus} cpus do not fit a node of ${partition.name} (${partition.coresPerNode} cores)`
          : `${resources.cpus} cpus per task x ${tasks} tasks per node = ${coresPerNode} cores do not fit a node of ` +
            `${partition.name} (${partition.coresPerNode} cores): cpus is per task (--cpus-per-task)`,
      expected:
        tasks === 1
          ? `<= ${partition.coresPerNode}`
          : `cpus x ntasksPerNode <= ${partition.coresPerNode}: cpus <= ${Math.floor(partition.coresPerNode / tasks)} with ${tasks} tasks per node`,
      found: tasks === 1 ? String(resources.cpus) : `${resources.cpus} x ${tasks} = ${coresPerNode}`,
    },
  ];
}

/** Time: within the partition's walltime limit. */
export function timeProblems({ index, partition, resources }: StageView): Problem[] {
  if (parseSlurmTime(resources.time) <= parseSlurmTime(partition.maxWalltime)) return [];
  return [
    {
      path: stagePath(index, 'resources', 'time'),
      message: `${resources.time} is longer than the ${partition.maxWalltime} limit of ${partition.name}`,
      expected: `<= ${partition.maxWalltime}`,
      found: resources.time,
    },
  ];
}

/** Billing: memory that is billed as more cores than asked for (the partition's `memPerCoreGB`). */
export function billingWarnings(
  { written, index, partition, resources }: StageView,
  cluster: ClusterProfile,
): string[] {
  if (!partition.memPerCoreGB) return [];
  // Billed per node: max(cpus x tasks, memory / memory per core of this partition).
  const tasks = resources.ntasksPerNode;
  const coresPerNode = resources.cpus * tasks;
  const billed = Math.ceil(resources.memGB / partition.memPerCoreGB - 1e-9);
  if (billed <= coresPerNode) return [];
  const cores =
    tasks === 1
      ? `${resources.cpus} cpus`
      : `${tasks} tasks x ${resources.cpus} cpus (${coresPerNode} cores per node)`;
  // The most cpus per task the billed cores pay for, without billing more.
  const freeCpus = Math.floor(billed / tasks);
  const atMost = `at most ${Math.floor(coresPerNode * partition.memPerCoreGB)}G`;
  const fix =
    freeCpus > resources.cpus
      ? `ask for ${freeCpus} cpus${tasks === 1 ? '' : ' per task'} (more DataLoader workers for free) or ${atMost}`
      : `ask for ${atMost}`;
  return [
    `stages[${index}] (${written.id}): ${resources.memGB}G on ${cores} is billed as ${billed} cores on ${cluster.name} ` +
      `(${partition.memPerCoreGB} GB per core on ${partition.name}): ${fix}`,
  ];
}

/** The environment on the stage's GPUs: its CUDA and its RAPIDS line support the GPU type. */
export function environmentGpuProblems(
  { partition, resources }: StageView,
  environment: EnvironmentSpec,
  builtFor: { cuda: Line | undefined; rapids: Line | undefined },
): Problem[] {
  const { cuda, rapids } = builtFor;
  const gpuType = resources.gpus.type;
  if (resources.gpus.count === 0 || !gpuType) return [];
  const out: Problem[] = [];
  if (cuda && !cudaSupportsGpu(cuda.major, gpuType))
    out.push({
      path: ['environment'],
      message: `environment ${environment.name} is built for CUDA ${cuda.major}.${cuda.minor}, whose builds exclude ${gpuType} (Volta): use a CUDA 12 environment on ${partition.name}`,
    });
  if (rapids && !rapidsSupportsGpu(rapids, gpuType))
    out.push({
      path: ['environment'],
      message: `environment ${environment.name} has RAPIDS ${rapids.major}.${String(rapids.minor).padStart(2, '0')}, which needs a GPU of compute capability 7.0 (Volta) or newer; ${gpuType} on ${partition.name} is older (RAPIDS 23.12 was the last for Pascal)`,
    });
  return out;
}

/** Where an override of a stage was written: the stage's own overrides, else the spec's. */
function overridePath(spec: ExperimentSpec, stageIndex: number, key: string): (string | number)[] {
  return key in spec.stages[stageIndex]!.overrides
    ? ['stages', stageIndex, 'overrides', key]
    : ['overrides', key];
}

/** Where sweep point `j`'s value of `key` was written: its grid key, else its entry of the list. */
function sweepPath(spec: ExperimentSpec, j: number, key: string): (string | number)[] {
  return spec.sweep?.grid && key in spec.sweep.grid
    ? ['sweep', 'grid', key]
    : ['sweep', 'list', j - gridSize(spec), key];
}

/** Overrides: each stage's, then each sweep point's, against the pipeline's JSON Schema. */
export function overrideProblems(
  spec: ExperimentSpec,
  stages: readonly ResolvedStage[],
  sweepPoints: readonly Record<string, Scalar>[],
  pipelineSchema: object,
): Problem[] {
  const out: Problem[] = [];
  stages.forEach((st, i) => {
    for (const p of validateOverrides(st.overrides, pipelineSchema))
      out.push({
        path: overridePath(spec, i, p.key),
        message: p.message,
        expected: p.expected,
        found: p.found,
      });
  });
  // rules across keys: each stage's overrides with each sweep point's on top (once without a sweep);
  // the problem is reported where its condition's value was written, once per place and value
  const seen = new Set<string>();
  stages.forEach((st, i) => {
    const points = sweepPoints.length ? sweepPoints : [{}];
    points.forEach((point: Record<string, Scalar>, j) => {
      for (const p of requirementProblems({ ...st.overrides, ...point }, pipelineSchema)) {
        const path = p.key in point ? sweepPath(spec, j, p.key) : overridePath(spec, i, p.key);
        const id = JSON.stringify([path, p.found]);
        if (seen.has(id)) continue;
        seen.add(id);
        out.push({ path, message: p.message, expected: p.expected, found: p.found });
      }
    });
  });
  sweepPoints.forEach((point, j) => {
    for (const p of validateOverrides(point, pipelineSchema))
      out.push({
        path: sweepPath(spec, j, p.key),
        message: p.message,
        expected: p.expected,
        found: p.found,
      });
  });
  return out;
}

/** DataLoader workers: `data.num_workers` plus the training process within the stage's cpus. */
export function workerWarnings(stages: readonly ResolvedStage[]): string[] {
  const out: string[] = [];
  stages.forEach((st, i) => {
    const workers = st.overrides['data.num_workers'];
    if (typeof workers === 'number' && workers + 1 > st.resources.cpus)
      out.push(
        `stages[${i}] (${st.id}): data.num_workers=${workers} plus the training process needs ${workers + 1} cpus but ${st.resources.cpus} are requested: ` +
          `workers will contend; ask for ${workers + 1} cpus or set data.num_workers=${Math.max(0, st.resources.cpus - 1)}`,
      );
  });
  return out;
}

/** cuGraph: `use_cugraph: true` needs pylibcugraphops in the stage's environment, unless `allowFallback`. */
export function cugraphProblems(
  spec: ExperimentSpec,
  environments: Readonly<Record<string, EnvironmentSpec>>,
  stages: readonly ResolvedStage[],
  sweepPoints: readonly Record<string, Scalar>[],
): Problem[] {
  if (spec.allowFallback) return [];
  const withCugraph = (o: Record<string, Scalar>) =>
    o['gat.use_cugraph'] === true || o['vgae.use_cugraph'] === true;
  const lacking = (st: ResolvedStage) => {
    const environment = environments[st.environment];
    return environment !== undefined && !hasCugraphOps(environment);
  };
  const out: Problem[] = [];
  stages.forEach((st, i) => {
    if (withCugraph(st.overrides) && lacking(st)) {
      const key = st.overrides['gat.use_cugraph'] === true ? 'gat.use_cugraph' : 'vgae.use_cugraph';
      out.push({
        path: overridePath(spec, i, key),
        message:
          `${key}: true needs pylibcugraphops (CuGraphGATConv), which environment ${st.environment} does not have ` +
          `(last released with RAPIDS 24.12): use environment gnn-rapids-cugraphops, or set allowFallback: true to run the standard layer`,
      });
    }
  });
  const without = stages.filter(lacking).map((st) => st.environment);
  if (sweepPoints.some(withCugraph) && without.length > 0)
    out.push({
      path: ['sweep'],
      message: `a sweep point sets use_cugraph: true on ${[...new Set(without)].join(', ')}, which has no pylibcugraphops: use gnn-rapids-cugraphops or allowFallback: true`,
    });
  return out;
}

/** Budget: only on a cluster with charging rules, which is what checks it. */
export function budgetProblems(spec: ExperimentSpec, cluster: ClusterProfile): Problem[] {
  if (!spec.budget || cluster.charging) return [];
  return [
    {
      path: ['budget', 'maxBillingUnits'],
      message: `cluster ${cluster.name} has no charging rules, so a budget cannot be checked: add charging: to the cluster profile or drop budget:`,
    },
  ];
}

function gridSize(spec: ExperimentSpec): number {
  const grid = Object.values(spec.sweep?.grid ?? {});
  return grid.length ? grid.reduce((n, v) => n * v.length, 1) : 0;
}
