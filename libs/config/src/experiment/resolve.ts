// From a validated spec, its cluster and its environment to the values the templates and the runner
// use: resources filled in from the partition and the original proposal's recommendations, checked against the
// partition, sweeps expanded, and the domain rules applied. Pure: problems are returned with their
// field paths, never thrown one at a time.
import { createHash } from 'node:crypto';
import type { ClusterProfile, Partition } from '../cluster/schema.ts';
import {
  cudaOf,
  cudaSupportsGpu,
  hasCugraphOps,
  rapidsLine,
  rapidsSupportsGpu,
} from '../environment/rules.ts';
import type { EnvironmentSpec } from '../environment/schema.ts';
import { formatSlurmTime, parseSlurmTime } from '../time.ts';
import { validateOverrides } from './overrides.ts';
import type { ExperimentSpec, Scalar, StageInput, StageName } from './schema.ts';
import { resolveTune, type ResolvedTune } from './tune.ts';

export interface Resources {
  cpus: number;
  memGB: number;
  gpus: { count: number; type?: string };
  nodes: number;
  ntasksPerNode: number;
  time: string;
  partition: string;
  arrayConcurrency: number;
}

export interface ResolvedStage {
  id: string;
  stage: StageName;
  model: 'gat' | 'vgae';
  scale: 'large' | 'small';
  dataset: string;
  dependsOn: string[];
  overrides: Record<string, Scalar>;
  resources: Resources;
  /** Outputs of earlier runs this stage reads (resolved and checked by the runner). */
  inputs?: StageInput[];
}

export interface ResolvedExperiment {
  spec: ExperimentSpec;
  /** sha256 (hex) of the canonical JSON of the spec: names run directories and finds duplicates. */
  specHash: string;
  cluster: ClusterProfile;
  partition: Partition;
  environment: EnvironmentSpec;
  account?: string;
  stages: ResolvedStage[];
  /** One entry per sweep point ([] when there is no sweep): the array index -> overrides map. */
  sweepPoints: Record<string, Scalar>[];
  requeue: ExperimentSpec['requeue'];
  staging: ExperimentSpec['staging'];
  profiling: ExperimentSpec['profiling'];
  /** The search when the spec has a `tune:` section (`nx run runner:tune`). */
  tune?: ResolvedTune;
}

export interface Problem {
  path: (string | number)[];
  message: string;
  expected?: string;
  found?: string;
}

/** The original proposal's recommendation for one V100 job: 8 cpus, 85 GB. */
const PLAN_CPUS = 8;
const PLAN_MEM_GB = 85;
const DEFAULT_TIME = 8 * 3600;
const DEFAULT_ARRAY_CONCURRENCY = 4;

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

export function specHash(spec: ExperimentSpec): string {
  const { $schema: _ignored, ...rest } = spec;
  return createHash('sha256').update(canonicalJson(rest)).digest('hex');
}

export function expandSweep(sweep: ExperimentSpec['sweep']): Record<string, Scalar>[] {
  if (!sweep) return [];
  let points: Record<string, Scalar>[] = [{}];
  const grid = Object.entries(sweep.grid ?? {});
  for (const [key, values] of grid) points = points.flatMap((p) => values.map((v) => ({ ...p, [key]: v })));
  const fromGrid = grid.length > 0 ? points : [];
  return [...fromGrid, ...(sweep.list ?? []).map((p) => ({ ...p }))];
}

export function resolveExperiment(
  spec: ExperimentSpec,
  cluster: ClusterProfile,
  environment: EnvironmentSpec,
  pipelineSchema: object,
): { resolved: ResolvedExperiment; problems: Problem[]; warnings: string[] } {
  const problems: Problem[] = [];
  const warnings: string[] = [];
  const partitionNames = cluster.partitions.map((p) => p.name);
  const findPartition = (name: string, path: (string | number)[]): Partition | undefined => {
    const p = cluster.partitions.find((q) => q.name === name);
    if (!p)
      problems.push({
        path,
        message: `partition "${name}" does not exist on ${cluster.name}`,
        expected: `one of ${partitionNames.join(', ')}`,
        found: JSON.stringify(name),
      });
    return p;
  };
  const defaultPartitionName = spec.partition ?? cluster.defaultPartition;
  const defaultPartition =
    findPartition(defaultPartitionName, spec.partition ? ['partition'] : ['cluster']) ??
    cluster.partitions[0]!;

  const account = spec.account ?? cluster.account;
  if (cluster.accountRequired && !account) {
    problems.push({
      path: ['account'],
      message: `${cluster.name} requires --account on every job: add \`account: <your project, e.g. PAS1266>\``,
      expected: 'a SLURM account',
      found: 'nothing',
    });
  }

  const ids = new Set<string>();
  const sweepPoints = expandSweep(spec.sweep);
  const cuda = cudaOf(environment);
  const rapids = rapidsLine(environment);

  const stages: ResolvedStage[] = spec.stages.map((s, i) => {
    const at = (...rest: (string | number)[]) => ['stages', i, ...rest];
    if (ids.has(s.id)) problems.push({ path: at('id'), message: `stage id "${s.id}" is used twice` });
    s.dependsOn.forEach((d, j) => {
      if (!ids.has(d))
        problems.push({
          path: at('dependsOn', j),
          message: `"${d}" is not an earlier stage of this spec`,
          expected: ids.size ? `one of ${[...ids].join(', ')}` : 'no dependencies for the first stage',
          found: JSON.stringify(d),
        });
    });
    ids.add(s.id);

    const r = s.resources;
    const partition = r.partition
      ? (findPartition(r.partition, at('resources', 'partition')) ?? defaultPartition)
      : defaultPartition;
    const gpuCount = r.gpus?.count ?? (partition.gpusPerNode > 0 ? 1 : 0);
    const gpuType = r.gpus?.type ?? (gpuCount > 0 ? partition.gpuType : undefined);
    // One task per GPU (DDP); `cpus` is per task (--cpus-per-task), so a node holds cpus x tasks.
    const ntasksPerNode = r.ntasksPerNode ?? Math.max(1, gpuCount);
    const resources: Resources = {
      cpus: r.cpus ?? Math.max(1, Math.min(PLAN_CPUS, Math.floor(partition.coresPerNode / ntasksPerNode))),
      memGB: r.memGB ?? Math.min(PLAN_MEM_GB, partition.memPerNodeGB),
      gpus: gpuType ? { count: gpuCount, type: gpuType } : { count: gpuCount },
      nodes: r.nodes ?? 1,
      ntasksPerNode,
      time: r.time ?? formatSlurmTime(Math.min(DEFAULT_TIME, parseSlurmTime(partition.maxWalltime))),
      partition: partition.name,
      arrayConcurrency: r.arrayConcurrency ?? DEFAULT_ARRAY_CONCURRENCY,
    };

    // Resources against the partition.
    if (gpuCount > partition.gpusPerNode)
      problems.push({
        path: at('resources', 'gpus', 'count'),
        message: `${gpuCount} GPUs per node do not fit partition ${partition.name} (${partition.gpusPerNode} per node)`,
        expected: `<= ${partition.gpusPerNode}`,
        found: String(gpuCount),
      });
    if (gpuCount > 0 && r.gpus?.type && partition.gpuType && r.gpus.type !== partition.gpuType)
      problems.push({
        path: at('resources', 'gpus', 'type'),
        message: `partition ${partition.name} has ${partition.gpuType} GPUs, not ${r.gpus.type}`,
        expected: partition.gpuType,
        found: r.gpus.type,
      });
    if (resources.memGB > partition.memPerNodeGB)
      problems.push({
        path: at('resources', 'memGB'),
        message: `${resources.memGB} GB does not fit a node of ${partition.name} (${partition.memPerNodeGB} GB usable)`,
        expected: `<= ${partition.memPerNodeGB}`,
        found: String(resources.memGB),
      });
    const coresPerNode = resources.cpus * resources.ntasksPerNode;
    if (coresPerNode > partition.coresPerNode) {
      const tasks = resources.ntasksPerNode;
      problems.push({
        // The field the spec wrote (cpus, else the task count that multiplies the default cpus).
        path: at(
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
      });
    }
    if (parseSlurmTime(resources.time) > parseSlurmTime(partition.maxWalltime))
      problems.push({
        path: at('resources', 'time'),
        message: `${resources.time} is longer than the ${partition.maxWalltime} limit of ${partition.name}`,
        expected: `<= ${partition.maxWalltime}`,
        found: resources.time,
      });
    if (partition.memPerCoreGB) {
      // Billed per node: max(cpus x tasks, memory / memory per core of this partition).
      const tasks = resources.ntasksPerNode;
      const billed = Math.ceil(resources.memGB / partition.memPerCoreGB - 1e-9);
      if (billed > coresPerNode) {
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
        warnings.push(
          `stages[${i}] (${s.id}): ${resources.memGB}G on ${cores} is billed as ${billed} cores on ${cluster.name} ` +
            `(${partition.memPerCoreGB} GB per core on ${partition.name}): ${fix}`,
        );
      }
    }
    if (cuda && gpuCount > 0 && gpuType && !cudaSupportsGpu(cuda.major, gpuType))
      problems.push({
        path: ['environment'],
        message: `environment ${environment.name} is built for CUDA ${cuda.major}.${cuda.minor}, whose builds exclude ${gpuType} (Volta): use a CUDA 12 environment on ${partition.name}`,
      });
    if (rapids && gpuCount > 0 && gpuType && !rapidsSupportsGpu(rapids, gpuType))
      problems.push({
        path: ['environment'],
        message: `environment ${environment.name} has RAPIDS ${rapids.major}.${String(rapids.minor).padStart(2, '0')}, which needs a GPU of compute capability 7.0 (Volta) or newer; ${gpuType} on ${partition.name} is older (RAPIDS 23.12 was the last for Pascal)`,
      });

    const overrides: Record<string, Scalar> = {
      ...spec.overrides,
      ...s.overrides,
      ...(spec.profiling.enabled
        ? { 'training.profile': true, 'training.profile_steps': spec.profiling.steps }
        : {}),
    };
    return {
      id: s.id,
      stage: s.stage,
      model: s.model,
      scale: s.scale,
      dataset: s.dataset,
      dependsOn: s.dependsOn,
      overrides,
      resources,
      ...(s.inputs?.length ? { inputs: s.inputs } : {}),
    };
  });

  // Overrides against the pipeline's JSON Schema, and the rules that depend on them.
  const overridePath = (stageIndex: number, key: string): (string | number)[] =>
    key in spec.stages[stageIndex]!.overrides ? ['stages', stageIndex, 'overrides', key] : ['overrides', key];
  stages.forEach((st, i) => {
    for (const p of validateOverrides(st.overrides, pipelineSchema))
      problems.push({
        path: overridePath(i, p.key),
        message: p.message,
        expected: p.expected,
        found: p.found,
      });
    const workers = st.overrides['data.num_workers'];
    if (typeof workers === 'number' && workers + 1 > st.resources.cpus)
      warnings.push(
        `stages[${i}] (${st.id}): data.num_workers=${workers} plus the training process needs ${workers + 1} cpus but ${st.resources.cpus} are requested: ` +
          `workers will contend; ask for ${workers + 1} cpus or set data.num_workers=${Math.max(0, st.resources.cpus - 1)}`,
      );
  });
  sweepPoints.forEach((point, j) => {
    for (const p of validateOverrides(point, pipelineSchema))
      problems.push({
        path:
          spec.sweep?.grid && p.key in spec.sweep.grid
            ? ['sweep', 'grid', p.key]
            : ['sweep', 'list', j - gridSize(spec), p.key],
        message: p.message,
        expected: p.expected,
        found: p.found,
      });
  });
  const withCugraph = (o: Record<string, Scalar>) =>
    o['gat.use_cugraph'] === true || o['vgae.use_cugraph'] === true;
  if (!hasCugraphOps(environment) && !spec.allowFallback) {
    stages.forEach((st, i) => {
      if (withCugraph(st.overrides)) {
        const key = st.overrides['gat.use_cugraph'] === true ? 'gat.use_cugraph' : 'vgae.use_cugraph';
        problems.push({
          path: overridePath(i, key),
          message:
            `${key}: true needs pylibcugraphops (CuGraphGATConv), which environment ${environment.name} does not have ` +
            `(last released with RAPIDS 24.12): use environment gnn-rapids-cugraphops, or set allowFallback: true to run the standard layer`,
        });
      }
    });
    if (sweepPoints.some(withCugraph))
      problems.push({
        path: ['sweep'],
        message: `a sweep point sets use_cugraph: true on ${environment.name}, which has no pylibcugraphops: use gnn-rapids-cugraphops or allowFallback: true`,
      });
  }

  if (spec.budget && !cluster.charging)
    problems.push({
      path: ['budget', 'maxBillingUnits'],
      message: `cluster ${cluster.name} has no charging rules, so a budget cannot be checked: add charging: to the cluster profile or drop budget:`,
    });

  let tune: ResolvedTune | undefined;
  if (spec.tune) {
    const t = resolveTune(spec.tune, {
      experiment: spec.name,
      stages,
      hasSweep: spec.sweep !== undefined,
      pipelineSchema,
    });
    tune = t.tune;
    problems.push(...t.problems);
    warnings.push(...t.warnings);
  }

  const resolved: ResolvedExperiment = {
    spec,
    specHash: specHash(spec),
    // The spec's account is the one every job of this experiment is charged to.
    cluster: account ? { ...cluster, account } : cluster,
    partition: defaultPartition,
    environment,
    ...(account ? { account } : {}),
    stages,
    sweepPoints,
    requeue: spec.requeue,
    staging: spec.staging,
    profiling: spec.profiling,
    ...(tune ? { tune } : {}),
  };
  return { resolved, problems, warnings };
}

function gridSize(spec: ExperimentSpec): number {
  const grid = Object.values(spec.sweep?.grid ?? {});
  return grid.length ? grid.reduce((n, v) => n * v.length, 1) : 0;
}
