// From a validated spec, its cluster and its environment to the values the templates and the runner
// use: resources filled in from the partition and the original proposal's recommendations, sweeps
// expanded, and the domain rules (rules.ts: partition, resources, environment, overrides, budget)
// applied in order. Pure: problems are returned with their field paths, never thrown one at a time.
import { createHash } from 'node:crypto';
import type { ClusterProfile, Partition } from '../cluster/schema.ts';
import { environmentSpecHash } from '../environment/render.ts';
import { cudaOf, rapidsLine } from '../environment/rules.ts';
import type { EnvironmentSpec } from '../environment/schema.ts';
import { formatSlurmTime, parseSlurmTime } from '../time.ts';
import {
  accountProblems,
  billingWarnings,
  budgetProblems,
  coreProblems,
  cugraphProblems,
  environmentGpuProblems,
  gpuProblems,
  memoryProblems,
  overrideProblems,
  partitionProblems,
  shardProblems,
  stageEnvProblems,
  stageOrderProblems,
  timeProblems,
  workerWarnings,
  type StageView,
} from './rules.ts';
import type { ExperimentSpec, Scalar, StageInput } from './schema.ts';
import { DEFAULT_PIPELINE_NAME, isDefaultPipeline, type Pipeline } from '../pipeline/pipeline.ts';
import { resolveTune, type ResolvedTune } from './tune.ts';
import { resolveStageArgs, type StageOutputRead } from './stage-args.ts';

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
  /** A stage, model and scale the experiment's pipeline declares. */
  stage: string;
  model: string;
  scale: string;
  dataset: string;
  dependsOn: string[];
  overrides: Record<string, Scalar>;
  resources: Resources;
  /** Outputs of earlier runs this stage reads (resolved and checked by the runner). */
  inputs?: StageInput[];
  /** The name of the environment the stage runs in (a key of `ResolvedExperiment.environments`). */
  environment: string;
  /** A sharded stage: N array tasks, then a join job (see StageSpecSchema.shards). */
  shards?: number;
  /** Variables the stage's job exports over its pipeline's and the stack's (StageSpecSchema.env). */
  env?: Record<string, string>;
  /** Its own words after the pipeline's command, outputs of earlier stages resolved to `{run_root}/…`. */
  args?: string[];
  /** The earlier stages' outputs its args name (each also in `dependsOn`). */
  reads?: StageOutputRead[];
  /** false: outside the spec's `sweep.stages`, so it runs once however many points the sweep has. */
  sweep?: false;
}

export interface ResolvedExperiment {
  spec: ExperimentSpec;
  /** sha256 (hex) of the canonical JSON of the spec: names run directories and finds duplicates. */
  specHash: string;
  cluster: ClusterProfile;
  partition: Partition;
  /** The training code every stage runs (the default pipeline unless the spec names another declaration). */
  pipeline: Pipeline;
  /** The experiment's environment: every stage's unless the stage names its own. */
  environment: EnvironmentSpec;
  /** Every environment a stage runs in, by name (the experiment's included). */
  environments: Record<string, EnvironmentSpec>;
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

/** A stage's resources: what it asked for, else filled in from its partition and the proposal. */
function stageResources(r: ExperimentSpec['stages'][number]['resources'], partition: Partition): Resources {
  const gpuCount = r.gpus?.count ?? (partition.gpusPerNode > 0 ? 1 : 0);
  const gpuType = r.gpus?.type ?? (gpuCount > 0 ? partition.gpuType : undefined);
  // One task per GPU (DDP); `cpus` is per task (--cpus-per-task), so a node holds cpus x tasks.
  const ntasksPerNode = r.ntasksPerNode ?? Math.max(1, gpuCount);
  return {
    cpus: r.cpus ?? Math.max(1, Math.min(PLAN_CPUS, Math.floor(partition.coresPerNode / ntasksPerNode))),
    memGB: r.memGB ?? Math.min(PLAN_MEM_GB, partition.memPerNodeGB),
    gpus: gpuType ? { count: gpuCount, type: gpuType } : { count: gpuCount },
    nodes: r.nodes ?? 1,
    ntasksPerNode,
    time: r.time ?? formatSlurmTime(Math.min(DEFAULT_TIME, parseSlurmTime(partition.maxWalltime))),
    partition: partition.name,
    arrayConcurrency: r.arrayConcurrency ?? DEFAULT_ARRAY_CONCURRENCY,
  };
}

const partitionNamed = (cluster: ClusterProfile, name: string) =>
  cluster.partitions.find((q) => q.name === name);

/** The rules of experiment/rules.ts, in order: problems with their field paths, and warnings. */
export function resolveExperiment(
  spec: ExperimentSpec,
  cluster: ClusterProfile,
  environment: EnvironmentSpec,
  pipeline: Pipeline,
  /** The environments stages name (`stages[].environment`), by the reference written there. */
  stageEnvironments: Readonly<Record<string, EnvironmentSpec>> = {},
): { resolved: ResolvedExperiment; problems: Problem[]; warnings: string[] } {
  const problems: Problem[] = [];
  const warnings: string[] = [];
  const defaultPartitionName = spec.partition ?? cluster.defaultPartition;
  problems.push(
    ...partitionProblems(cluster, defaultPartitionName, spec.partition ? ['partition'] : ['cluster']),
  );
  const defaultPartition = partitionNamed(cluster, defaultPartitionName) ?? cluster.partitions[0]!;
  const account = spec.account ?? cluster.account;
  problems.push(...accountProblems(cluster, account));

  const sweepPoints = expandSweep(spec.sweep);
  const sweptIds = spec.sweep?.stages;
  sweptIds?.forEach((id, j) => {
    if (!spec.stages.some((s) => s.id === id))
      problems.push({
        path: ['sweep', 'stages', j],
        message: `sweep.stages names ${id}, which is not a stage of this spec`,
        expected: `stage ids among ${spec.stages.map((s) => s.id).join(', ')}`,
        found: JSON.stringify(id),
      });
  });
  const isSwept = (id: string) => sweptIds === undefined || sweptIds.includes(id);
  const environments: Record<string, EnvironmentSpec> = { [environment.name]: environment };
  const environmentOf = (s: ExperimentSpec['stages'][number], i: number): EnvironmentSpec => {
    // One that did not load has its problem reported by the loader already.
    const own = s.environment !== undefined ? stageEnvironments[s.environment] : undefined;
    if (!own) return environment;
    const same = environments[own.name];
    if (same && environmentSpecHash(same) !== environmentSpecHash(own)) {
      problems.push({
        path: ['stages', i, 'environment'],
        message: `environment ${own.name} (${s.environment}) is not the ${own.name} another stage of this experiment uses: one name, one environment`,
      });
      return same;
    }
    environments[own.name] = own;
    return own;
  };

  const stages: ResolvedStage[] = spec.stages.map((s, i) => {
    if (isDefaultPipeline(pipeline)) problems.push(...stageOrderProblems(spec.stages, i));
    else if (s.inputs?.length)
      problems.push({
        path: ['stages', i, 'inputs'],
        message: `inputs from earlier runs are checked by ${DEFAULT_PIPELINE_NAME}'s graph-cache digests: pipeline ${pipeline.name} writes none`,
        expected: 'no inputs: (give the earlier output to the stage through an override)',
      });
    const named = s.resources.partition;
    if (named) problems.push(...partitionProblems(cluster, named, ['stages', i, 'resources', 'partition']));
    const partition = (named ? partitionNamed(cluster, named) : undefined) ?? defaultPartition;
    const resources = stageResources(s.resources, partition);
    const view: StageView = { written: s, index: i, partition, resources };
    const stageEnvironment = environmentOf(s, i);
    const builtFor = { cuda: cudaOf(stageEnvironment), rapids: rapidsLine(stageEnvironment) };
    problems.push(
      ...gpuProblems(view),
      ...memoryProblems(view),
      ...coreProblems(view),
      ...timeProblems(view),
      ...environmentGpuProblems(view, stageEnvironment, builtFor),
      ...shardProblems(view, pipeline, sweepPoints.length > 0),
      ...stageEnvProblems(s.env, pipeline, i),
    );
    warnings.push(...billingWarnings(view, cluster));
    const own = resolveStageArgs(s.args, i, spec.stages, pipeline);
    problems.push(...own.problems);
    if (sweepPoints.length > 0 && !isSwept(s.id))
      for (const r of own.reads.filter((read) => isSwept(read.stage)))
        problems.push({
          path: ['stages', i, 'args'],
          message: `stage ${s.id} runs once, outside sweep.stages, but reads {output:${r.stage}.${r.output}}, which the sweep makes once per point`,
          expected: `${s.id} in sweep.stages, or ${r.stage} out of it`,
          found: JSON.stringify(sweptIds ?? []),
        });
    const dependsOn = [...s.dependsOn, ...own.dependsOn.filter((d) => !s.dependsOn.includes(d))];
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
      dependsOn,
      overrides,
      resources,
      ...(s.inputs?.length ? { inputs: s.inputs } : {}),
      environment: stageEnvironment.name,
      ...(s.shards !== undefined ? { shards: s.shards } : {}),
      ...(s.env !== undefined && Object.keys(s.env).length > 0 ? { env: s.env } : {}),
      ...(own.args.length > 0 ? { args: own.args } : {}),
      ...(own.reads.length > 0 ? { reads: own.reads } : {}),
      ...(sweepPoints.length > 0 && !isSwept(s.id) ? { sweep: false as const } : {}),
    };
  });

  if (pipeline.requeue === 'lightning' && spec.requeue.enabled && spec.requeue.signal !== 'USR1')
    problems.push({
      path: ['requeue', 'signal'],
      message: `pipeline ${pipeline.name} requeues itself the Lightning way, on SIGUSR1 (SLURMEnvironment's requeue_signal)`,
      expected: 'USR1',
      found: JSON.stringify(spec.requeue.signal),
    });
  if (pipeline.configSchema)
    problems.push(...overrideProblems(spec, stages, sweepPoints, pipeline.configSchema));
  else if (stages.some((s) => Object.keys(s.overrides).length > 0) || sweepPoints.length > 0)
    warnings.push(
      `overrides not checked: pipeline ${pipeline.name} publishes no config schema (schema.file or schema.command in its declaration), so they are passed to it as written`,
    );
  if (isDefaultPipeline(pipeline)) {
    // Rules about the default pipeline's own config (loader workers, the fused cuGraph layer).
    warnings.push(...workerWarnings(stages));
    problems.push(...cugraphProblems(spec, environments, stages, sweepPoints));
  }
  problems.push(...budgetProblems(spec, cluster));

  let tune: ResolvedTune | undefined;
  if (spec.tune && !(isDefaultPipeline(pipeline) && pipeline.configSchema)) {
    problems.push({
      path: ['tune'],
      message: `a tune study runs ${DEFAULT_PIPELINE_NAME}'s Optuna workers: pipeline ${pipeline.name} has none`,
      expected: `no tune: section, or pipeline ${DEFAULT_PIPELINE_NAME}`,
    });
  } else if (spec.tune) {
    const t = resolveTune(spec.tune, {
      experiment: spec.name,
      stages,
      hasSweep: spec.sweep !== undefined,
      pipelineSchema: pipeline.configSchema!,
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
    pipeline,
    environment,
    environments,
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
