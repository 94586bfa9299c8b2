/**
 * The per-run SLURM job script (one run, or an array over sweep points), in the manner of submitit's
 * `_make_sbatch_string`: a pure function from validated config values to text.
 */
import { parseSlurmTime, runDirPath } from '@kdgat/config';
import type {
  EnvironmentView,
  LayoutView,
  PartitionView,
  ProfileView,
  RequeuePolicy,
  Scalar,
  SiteScriptPaths,
  StageView,
  StagingPolicy,
} from '../inputs.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { shq } from '../quote/shq.ts';
import {
  RULES,
  requireAbsolutePath,
  requireMatch,
  requireName,
  requirePositiveInt,
} from '../quote/validate.ts';
import {
  activationLines,
  checkRequeuePolicy,
  epilogTrapLines,
  moduleLines,
  overrideWords,
  preambleLines,
  requeueDecisionLines,
  runPipelineLines,
  samplerLines,
  sbatchLines,
  signalTrapLines,
} from './blocks.ts';
import { encodeArrayTable, scalarText } from './array-table.ts';

export interface TrainJobInput {
  /** Experiment name as the user wrote it (any text; the job name uses a slug of it). */
  experiment: string;
  stage: StageView;
  profile: ProfileView;
  /** Used only to default the GPU type of `--gres` when the stage names none. */
  partition?: Pick<PartitionView, 'gpuType'>;
  environment: EnvironmentView;
  layout: Pick<LayoutView, 'cacheDirs' | 'logsDir'>;
  /** `--run-root` of this run; array task i runs under `<runRoot>/point_<i>`. */
  runRoot: string;
  scripts: SiteScriptPaths;
  requeue: RequeuePolicy;
  staging: StagingPolicy;
  /** Sweep points: a job array with one task per point when non-empty. */
  sweepPoints?: Record<string, Scalar>[];
  /**
   * Global index of task 0 when the sweep is split into chunks at MaxArraySize (default 0): task i
   * runs under `<runRoot>/point_<firstPoint + i>`, where the next stage's chunk looks for it.
   */
  firstPoint?: number;
  /** Absolute path where the caller writes `arrayTable` (next to the script); required for arrays. */
  arrayTablePath?: string;
  /**
   * A hyperparameter study's workers instead of a stage run: a job array of `workers` tasks, each
   * running `python -m kdgat tune --study-dir <studyDir>` under `<runRoot>/worker_<i>`.
   */
  tune?: { studyDir: string; workers: number };
  /** Job ids this job waits for (`--dependency=afterok:…`). */
  afterOk?: string[];
  /** Seconds between GPU samples (default 10). */
  gpuSampleSeconds?: number;
}

export interface RenderedTrainJob {
  script: string;
  /** Rendered overrides table for arrays (see array-table.ts), written to `arrayTablePath`. */
  arrayTable?: string;
}

export function renderTrainJob(input: TrainJobInput): RenderedTrainJob {
  const { stage, profile } = input;
  const r = stage.resources;
  for (const f of ['id', 'stage', 'model', 'scale', 'dataset'] as const) requireName(`stage.${f}`, stage[f]);
  checkRequeuePolicy(input.requeue);
  const points = input.sweepPoints ?? [];
  const tune = input.tune;
  if (tune && points.length > 0)
    throw new TemplateInputError('tune', 'with sweepPoints', 'either sweep points or a tune study, not both');
  const workers = tune ? requirePositiveInt('tune.workers', tune.workers) : 0;
  const studyDir = tune ? requireAbsolutePath('tune.studyDir', tune.studyDir) : '';
  const arraySize = tune ? workers : points.length;
  const isArray = points.length > 0;
  const jobName = jobNameFor(input.experiment, stage.id);
  const runSuffix = `/${runDirPath(stage)}`;
  const runRoot = requireAbsolutePath('runRoot', input.runRoot);
  const multiTask = r.nodes > 1 || r.ntasksPerNode > 1;

  const lines: string[] = ['#!/bin/bash'];
  if (profile.scheduler === 'slurm') {
    lines.push(...sbatchLines(directivesFor(input, jobName, arraySize)));
  } else {
    lines.push(
      '# Local executor: the runner runs this script with bash and SLURM_* variables it emulates; no #SBATCH lines.',
      `# Resources requested: ${describeResources(r)}.`,
    );
  }
  lines.push(
    ...preambleLines({
      title: tune
        ? `KD-GAT ${stage.stage} study (${jobName}), array of ${workers} tune workers`
        : `KD-GAT ${stage.stage} (${jobName})${isArray ? `, array of ${points.length} sweep points` : ''}`,
      profile,
      stageDataPath: input.staging.enabled ? input.scripts.stageData : undefined,
      epilogPath: input.scripts.epilog,
    }),
    `kdgat_experiment=${shq(input.experiment)}`,
    `kdgat_run_root=${shq(runRoot)}`,
  );

  let arrayTable: string | undefined;
  if (isArray) {
    if (input.arrayTablePath === undefined) {
      throw new TemplateInputError(
        'arrayTablePath',
        undefined,
        'an absolute path for the sweep table of an array job',
      );
    }
    arrayTable = encodeArrayTable(points);
    lines.push(
      '',
      ...arrayTaskLines(
        requireAbsolutePath('arrayTablePath', input.arrayTablePath),
        points.length,
        input.firstPoint === undefined || input.firstPoint === 0
          ? 0
          : requirePositiveInt('firstPoint', input.firstPoint),
      ),
    );
  }
  if (tune) lines.push('', ...tuneTaskLines(workers));
  lines.push(
    `kdgat_run_dir=$kdgat_run_root${shq(runSuffix)}`,
    ...recordLines(stage),
    'printf \'kdgat: experiment %s, stage %s, job %s on %s (cluster profile %s)\\n\' "$kdgat_experiment" ' +
      `${shq(stage.id)} "$kdgat_job_id" "$(hostname)" "$kdgat_profile"`,
    '',
    ...epilogTrapLines(),
  );
  // Installed before anything slow (modules, staging) so an early signal is handled, not fatal.
  const trap = signalTrapLines(input.requeue);
  if (trap.length > 0) lines.push('', ...trap);

  const modules = moduleLines(profile);
  if (modules.length > 0) lines.push('', ...modules);
  lines.push('', ...activationLines(input.environment, profile));
  lines.push('', ...stagingLines(input));
  lines.push('', ...samplerLines(input.gpuSampleSeconds ?? 10));

  lines.push('', ...(tune ? tuneCommandLines(studyDir) : commandLines(stage, multiTask, isArray)));
  lines.push('', ...runPipelineLines(input.requeue));
  lines.push('', ...requeueDecisionLines(input.requeue));
  lines.push('exit "$kdgat_status"', '');
  return { script: lines.join('\n'), ...(arrayTable === undefined ? {} : { arrayTable }) };
}

/** What the epilog writes into the job record next to what the job used (key=value words). */
function recordLines(stage: StageView): string[] {
  const r = stage.resources;
  const time = requireMatch('resources.time', r.time, RULES.slurmTime);
  const request =
    `cpus=${requirePositiveInt('resources.cpus', r.cpus)} memGB=${r.memGB} gpus=${r.gpus.count * r.nodes} ` +
    `timeSeconds=${parseSlurmTime(time)} partition=${requireName('resources.partition', r.partition)}`;
  const who = `stageId=${stage.id} stage=${stage.stage} model=${stage.model} scale=${stage.scale} dataset=${stage.dataset}`;
  return [
    '# What this job asked for, for the record the epilog leaves in the run dir (job_record.jsonl).',
    `export KDGAT_RECORD_REQUEST=${shq(request)}`,
    `export KDGAT_RECORD_STAGE=${shq(who)}`,
  ];
}

/** `kdgat-<experiment slug>-<stage id>`: the experiment name may be any text, job names may not. */
export function jobNameFor(experiment: string, stageId: string): string {
  const slug = experiment
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '') // accents off: ü -> u
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[-.]+|-+$/g, '')
    .slice(0, 48);
  return requireMatch('job name', `kdgat-${slug === '' ? 'x' : slug}-${stageId}`.replace(/--+/g, '-'), RULES.jobName);
}

function describeResources(r: StageView['resources']): string {
  return `${r.nodes} node(s) x ${r.ntasksPerNode} task(s), ${r.cpus} cpus/task, ${r.memGB} GB, ${r.gpus.count} GPU(s)/node, ${r.time}`;
}

function directivesFor(
  input: TrainJobInput,
  jobName: string,
  arraySize: number,
): [string, string | number][] {
  const { profile, stage, requeue } = input;
  const r = stage.resources;
  const d: [string, string | number][] = [['job-name', jobName]];
  if (profile.account !== undefined && profile.account !== '')
    d.push(['account', requireMatch('profile.account', profile.account, RULES.account)]);
  else if (profile.accountRequired)
    throw new TemplateInputError(
      'profile.account',
      profile.account,
      `an account: cluster profile ${profile.name} requires --account`,
    );
  d.push(
    ['partition', requireName('resources.partition', r.partition)],
    ['nodes', requirePositiveInt('resources.nodes', r.nodes)],
    ['ntasks-per-node', requirePositiveInt('resources.ntasksPerNode', r.ntasksPerNode)],
    ['cpus-per-task', requirePositiveInt('resources.cpus', r.cpus)],
    ['mem', memDirective(r.memGB)],
  );
  const gpu = gpuDirective(profile, r.gpus, input.partition?.gpuType);
  if (gpu !== undefined) d.push(gpu);
  d.push([
    'time',
    requireMatch('resources.time', r.time, RULES.slurmTime),
  ]);
  const logs = requireMatch('layout.logsDir', input.layout.logsDir.replace(/\/+$/, ''), RULES.directivePath);
  const pattern = arraySize > 0 ? '%x-%A_%a' : '%x-%j';
  d.push(['output', `${logs}/${pattern}.out`], ['error', `${logs}/${pattern}.err`], ['open-mode', 'append']);
  if (requeue.enabled) d.push(['signal', `B:${requeue.signal}@${requeue.leadSeconds}`], ['requeue', '']);
  else d.push(['no-requeue', '']);
  if (input.tune) {
    d.push(['array', `0-${arraySize - 1}`]); // nWorkers is the parallelism: all of them at once
  } else if (arraySize > 0) {
    const k = r.arrayConcurrency;
    d.push(['array', `0-${arraySize - 1}${Number.isInteger(k) && k > 0 && k < arraySize ? `%${k}` : ''}`]);
  }
  const after = input.afterOk ?? [];
  if (after.length > 0) {
    after.forEach((id, i) => requireMatch(`afterOk[${i}]`, id, RULES.jobId));
    d.push(['dependency', `afterok:${after.join(':')}`], ['kill-on-invalid-dep', 'yes']);
  }
  return d;
}

function memDirective(memGB: number): string {
  if (!Number.isFinite(memGB) || memGB <= 0)
    throw new TemplateInputError('resources.memGB', memGB, 'a positive number of GB');
  return Number.isInteger(memGB) ? `${memGB}G` : `${Math.ceil(memGB * 1024)}M`;
}

function gpuDirective(
  profile: ProfileView,
  gpus: StageView['resources']['gpus'],
  partitionGpuType: string | undefined,
): [string, string] | undefined {
  if (gpus.count === 0) return undefined;
  requirePositiveInt('resources.gpus.count', gpus.count);
  const type = gpus.type ?? partitionGpuType;
  const typed =
    type === undefined || type === ''
      ? `${gpus.count}`
      : `${requireMatch('resources.gpus.type', type, RULES.gpuType)}:${gpus.count}`;
  if (profile.gpuDirective === 'gres') return ['gres', `gpu:${typed}`];
  if (profile.gpuDirective === 'gpus-per-node') return ['gpus-per-node', typed];
  throw new TemplateInputError('profile.gpuDirective', profile.gpuDirective, "'gres' or 'gpus-per-node'");
}

function arrayTaskLines(tablePath: string, size: number, firstPoint: number): string[] {
  return [
    '# Array task: its overrides come from the rendered table next to this script (read as data, never evaluated).',
    `kdgat_array_table=${shq(tablePath)}`,
    `kdgat_array_size=${size}`,
    'kdgat_task=${SLURM_ARRAY_TASK_ID:-}',
    'if [[ ! $kdgat_task =~ ^[0-9]+$ ]] || ((kdgat_task >= kdgat_array_size)); then',
    `  echo "kdgat: SLURM_ARRAY_TASK_ID='$kdgat_task' is not a task of this array (0-${size - 1})" >&2`,
    '  exit 64',
    'fi',
    'kdgat_point_overrides=()',
    "while IFS=$'\\t' read -r kdgat_index kdgat_key kdgat_encoded; do",
    '  [[ $kdgat_index == "$kdgat_task" ]] || continue',
    '  printf -v kdgat_value \'%b\' "$kdgat_encoded"',
    '  kdgat_point_overrides+=(-O "$kdgat_key" "$kdgat_value")',
    'done <"$kdgat_array_table"',
    firstPoint === 0
      ? 'kdgat_run_root=$kdgat_run_root/point_$kdgat_task'
      : `kdgat_run_root=$kdgat_run_root/point_$((kdgat_task + ${firstPoint}))`,
  ];
}

function tuneTaskLines(workers: number): string[] {
  return [
    '# Tune worker: every task pulls trials from the same study; each keeps its own run root.',
    'kdgat_task=${SLURM_ARRAY_TASK_ID:-0}',
    `if [[ ! $kdgat_task =~ ^[0-9]+$ ]] || ((kdgat_task >= ${workers})); then`,
    `  echo "kdgat: SLURM_ARRAY_TASK_ID='$kdgat_task' is not a worker of this study (0-${workers - 1})" >&2`,
    '  exit 64',
    'fi',
    'kdgat_run_root=$kdgat_run_root/worker_$kdgat_task',
  ];
}

function tuneCommandLines(studyDir: string): string[] {
  return [
    'kdgat_cmd=(',
    `  python -m kdgat tune --study-dir ${shq(studyDir)}`,
    '  --run-root "$kdgat_run_root"',
    ')',
  ];
}

function stagingLines(input: TrainJobInput): string[] {
  const { staging, layout } = input;
  const cacheDirFor = (ds: string): string => {
    requireName('staging.datasets[]', ds);
    const dir = layout.cacheDirs[ds];
    if (dir === undefined) {
      throw new TemplateInputError(
        `layout.cacheDirs.${ds}`,
        dir,
        `a scratch cache dir for dataset ${ds} (known: ${Object.keys(layout.cacheDirs).join(', ') || 'none'})`,
      );
    }
    return requireAbsolutePath(`layout.cacheDirs.${ds}`, dir);
  };
  const scratchRoot = (): string => {
    const dir = cacheDirFor(input.stage.dataset).replace(/\/+$/, '');
    // The pipeline reads $KD_GAT_CACHE_ROOT/<dataset>: the cache dir must end in the dataset's name.
    if (!dir.endsWith(`/${input.stage.dataset}`))
      throw new TemplateInputError(
        `layout.cacheDirs.${input.stage.dataset}`,
        dir,
        `a directory named after the dataset (…/${input.stage.dataset})`,
      );
    return dir.slice(0, -input.stage.dataset.length - 1) || '/';
  };
  if (input.stage.stage === 'preprocess') {
    // The cache it builds must outlive the job (node-local $TMPDIR is deleted at job end), and
    // there is nothing to stage before it exists: write it to scratch, where later stages stage it from.
    return [
      '# preprocess builds the graph cache in scratch (never $TMPDIR, which is deleted at job end).',
      `export KD_GAT_CACHE_ROOT=${shq(scratchRoot())}`,
    ];
  }
  if (!staging.enabled) {
    return [
      '# Staging is off for this experiment: the pipeline reads the scratch cache directly.',
      `export KD_GAT_CACHE_ROOT=${shq(scratchRoot())}`,
    ];
  }
  const datasets = staging.datasets.length > 0 ? staging.datasets : [input.stage.dataset];
  return [
    '# P0: copy the dataset caches to node-local disk (verified, atomic); exports KD_GAT_CACHE_ROOT.',
    '# shellcheck source=/dev/null',
    'source "$kdgat_stage_data_script"',
    ...datasets.map((ds) => `kdgat_stage_data ${shq(ds)} ${shq(cacheDirFor(ds))}`),
  ];
}

function commandLines(stage: StageView, multiTask: boolean, isArray: boolean): string[] {
  const r = stage.resources;
  const launcher = multiTask
    ? [
        '  # Several tasks: srun starts one per GPU so Lightning picks up DDP from the SLURM environment.',
        `  srun --kill-on-bad-exit=1 --cpus-per-task=${r.cpus}`,
      ]
    : [];
  const overrides = Object.entries(stage.overrides).map(([key, value]) => {
    requireMatch(`stage.overrides key`, key, RULES.overrideKey);
    return `  ${overrideWords(key, scalarText(`stage.overrides.${key}`, value))}`;
  });
  return [
    'kdgat_cmd=(',
    ...launcher,
    `  python -m kdgat ${shq(stage.stage)}`,
    `  --model ${shq(stage.model)} --scale ${shq(stage.scale)} --dataset ${shq(stage.dataset)}`,
    '  --run-root "$kdgat_run_root"',
    ...overrides,
    ')',
    ...(isArray ? ['kdgat_cmd+=("${kdgat_point_overrides[@]}")'] : []),
  ];
}
