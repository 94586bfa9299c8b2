// The `tune:` section of an experiment spec: an Optuna study over pipeline config keys, run as one
// job array of `nWorkers` workers that pull trials from one shared study until `nTrials` are done.
// The default pruner is DEFAULT_PRUNER (Hyperband 3/100/3 inside a PatientPruner(4)). Bounds and
// defaults of what reaches study.json come from its schema (Python's StudyConfig, see study.ts).
import { z } from 'zod';
import { SafeName } from '../cluster/schema.ts';
import { STAGE_METRICS } from '../contract/run-contract.ts';
import { validateOverrides } from './overrides.ts';
import { OverrideKey, ScalarSchema, type StageName } from './primitives.ts';
import { studyDefault, studyInt, studyNumber, studyProperty } from './study.ts';

const FloatParam = z
  .object({
    type: z.literal('float'),
    low: z.number(),
    high: z.number(),
    /** Sample on a log scale (low must be > 0). */
    log: z.boolean().default(false),
  })
  .strict();

const IntParam = z
  .object({
    type: z.literal('int'),
    low: z.number().int(),
    high: z.number().int(),
    step: studyInt('IntParam.step').default(studyDefault('IntParam.step')),
    log: z.boolean().default(false),
  })
  .strict();

const CategoricalParam = z
  .object({
    type: z.literal('categorical'),
    choices: z.array(ScalarSchema).min(1, 'at least one choice'),
  })
  .strict();

export const SearchParamSchema = z.discriminatedUnion('type', [FloatParam, IntParam, CategoricalParam]);
export type SearchParam = z.infer<typeof SearchParamSchema>;

const PatientSchema = z
  .object({
    /** Epochs without improvement before the wrapped pruner is consulted. */
    patience: studyInt('Patient.patience'),
    minDelta: studyNumber('Patient.minDelta').default(studyDefault('Patient.minDelta')),
  })
  .strict();

export const PrunerSchema = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('hyperband'),
      /** Epochs every trial gets before it can be pruned. */
      minResource: studyInt('HyperbandSpec.minResource').default(studyDefault('HyperbandSpec.minResource')),
      maxResource: studyInt('HyperbandSpec.maxResource').default(studyDefault('HyperbandSpec.maxResource')),
      reductionFactor: studyInt('HyperbandSpec.reductionFactor').default(studyDefault('HyperbandSpec.reductionFactor')),
      patient: PatientSchema.optional(),
    })
    .strict(),
  z
    .object({
      type: z.literal('median'),
      startupTrials: studyInt('MedianSpec.startupTrials').default(studyDefault('MedianSpec.startupTrials')),
      warmupSteps: studyInt('MedianSpec.warmupSteps').default(studyDefault('MedianSpec.warmupSteps')),
      patient: PatientSchema.optional(),
    })
    .strict(),
  z.object({ type: z.literal('none') }).strict(),
]);
export type PrunerSpec = z.infer<typeof PrunerSchema>;

/** The default pruning policy: Hyperband 3/100/3 inside a PatientPruner(4), the fix for 86.5% of trials pruned after one epoch. */
export const DEFAULT_PRUNER: PrunerSpec = {
  type: 'hyperband',
  minResource: 3,
  maxResource: 100,
  reductionFactor: 3,
  patient: { patience: 4, minDelta: 0 },
};

export const TuneSchema = z
  .object({
    /** Id of the stage whose runs are the trials (default: the last stage). */
    stage: SafeName.optional(),
    /** Study name (default: the experiment name); `tune-report --study` and `train --from-study` take it. */
    study: SafeName.optional(),
    objective: z
      .object({
        metric: z.string().regex(new RegExp(studyProperty('Objective.metric').pattern ?? '.*'), 'a metric name such as val_loss'),
        /** Default: minimize for losses, maximize otherwise. */
        direction: z.enum(['minimize', 'maximize']).optional(),
      })
      .strict(),
    nTrials: studyInt('nTrials'),
    /** Parallel SLURM tasks (one job array) pulling trials from the study. */
    nWorkers: studyInt('nWorkers'),
    space: z.record(OverrideKey, SearchParamSchema),
    pruner: PrunerSchema.default(DEFAULT_PRUNER),
    sampler: z
      .object({
        type: z.enum(['tpe', 'random']).default('tpe'),
        seed: studyInt('Sampler.seed').optional(),
      })
      .strict()
      .default({ type: 'tpe' }),
    /** How often a worker records that its trial is alive. */
    heartbeatSeconds: studyInt('heartbeatSeconds').default(studyDefault('heartbeatSeconds')),
    /** A RUNNING trial whose heartbeat is older than this is failed and retried by another worker. */
    staleAfterSeconds: studyInt('staleAfterSeconds').default(studyDefault('staleAfterSeconds')),
    /** How many times a trial lost to a dead or requeued worker is retried with the same params. */
    maxRetries: studyInt('maxRetries').default(studyDefault('maxRetries')),
  })
  .strict();

export type TuneSpec = z.infer<typeof TuneSchema>;

export interface ResolvedTune extends Omit<TuneSpec, 'stage' | 'study' | 'objective'> {
  stage: string;
  study: string;
  objective: { metric: string; direction: 'minimize' | 'maximize' };
}

export interface TuneProblem {
  path: (string | number)[];
  message: string;
  expected?: string;
  found?: string;
}

type StageLike = { id: string; stage: StageName; dependsOn: string[]; overrides: Record<string, unknown> };

/**
 * Checks a tune section against the spec's stages and the pipeline's JSON Schema: the tuned stage
 * trains and nothing depends on it, every search-space key is a pipeline key whose type fits the
 * parameter, ranges are not empty, the pruner's resources are ordered, the metric is logged.
 */
export function resolveTune(
  tune: TuneSpec,
  ctx: { experiment: string; stages: readonly StageLike[]; hasSweep: boolean; pipelineSchema: object },
): { tune: ResolvedTune; problems: TuneProblem[]; warnings: string[] } {
  const problems: TuneProblem[] = [];
  const warnings: string[] = [];
  const ids = ctx.stages.map((s) => s.id);
  const stageId = tune.stage ?? ids[ids.length - 1]!;
  const stage = ctx.stages.find((s) => s.id === stageId);
  if (!stage) {
    problems.push({
      path: ['tune', 'stage'],
      message: `"${stageId}" is not a stage of this spec`,
      expected: `one of ${ids.join(', ')}`,
      found: JSON.stringify(stageId),
    });
  }
  if (ctx.hasSweep)
    problems.push({
      path: ['sweep'],
      message: 'a spec has either a sweep (a fixed grid) or a tune section (a search), not both',
    });

  const metrics = stage ? STAGE_METRICS[stage.stage] : undefined;
  if (stage && !metrics) {
    problems.push({
      path: ['tune', 'stage'],
      message: `stage ${stage.id} runs ${stage.stage}, which trains nothing: tune a training stage`,
      expected: `a stage running ${Object.keys(STAGE_METRICS).join(', ')}`,
      found: stage.stage,
    });
  }
  if (stage) {
    const after = ctx.stages.filter((s) => s.dependsOn.includes(stage.id)).map((s) => s.id);
    if (after.length > 0)
      problems.push({
        path: ['tune', 'stage'],
        message: `stage(s) ${after.join(', ')} depend on the tuned stage ${stage.id}: a study has no single output to chain on; tune, then \`train --from-study ${tune.study ?? ctx.experiment} --best\``,
      });
  }
  if (metrics && !metrics.includes(tune.objective.metric))
    problems.push({
      path: ['tune', 'objective', 'metric'],
      message: `stage ${stage!.stage} does not log ${tune.objective.metric} each epoch`,
      expected: `one of ${metrics.join(', ')}`,
      found: JSON.stringify(tune.objective.metric),
    });
  const isLoss = /loss/.test(tune.objective.metric);
  const direction = tune.objective.direction ?? (isLoss ? 'minimize' : 'maximize');
  if (isLoss && direction === 'maximize')
    warnings.push(`tune.objective: maximizing ${tune.objective.metric} (a loss): is minimize meant?`);

  if (tune.nWorkers > tune.nTrials)
    problems.push({
      path: ['tune', 'nWorkers'],
      message: `${tune.nWorkers} workers for ${tune.nTrials} trials: some workers would have nothing to do`,
      expected: `<= ${tune.nTrials}`,
      found: String(tune.nWorkers),
    });
  if (tune.staleAfterSeconds <= 2 * tune.heartbeatSeconds)
    problems.push({
      path: ['tune', 'staleAfterSeconds'],
      message: `a trial would count as lost after ${tune.staleAfterSeconds} s while its worker beats every ${tune.heartbeatSeconds} s`,
      expected: `> ${2 * tune.heartbeatSeconds} (twice heartbeatSeconds)`,
      found: String(tune.staleAfterSeconds),
    });

  const keys = Object.keys(tune.space);
  if (keys.length === 0)
    problems.push({ path: ['tune', 'space'], message: 'the search space is empty', expected: 'at least one key' });
  for (const key of keys) problems.push(...paramProblems(key, tune.space[key]!, ctx.pipelineSchema));
  if (stage)
    for (const key of keys.filter((k) => k in stage.overrides))
      warnings.push(`tune.space.${key}: the search overrides the value ${JSON.stringify(stage.overrides[key])} set for stage ${stage.id}`);

  problems.push(...prunerProblems(tune.pruner));
  if (tune.pruner.type === 'hyperband' && stage) {
    const epochs = stage.overrides['training.max_epochs'];
    if (typeof epochs === 'number' && epochs < tune.pruner.maxResource)
      warnings.push(
        `tune.pruner.maxResource is ${tune.pruner.maxResource} epochs but trials stop after training.max_epochs=${epochs}: Hyperband's brackets assume trials can reach maxResource`,
      );
  }

  const resolved: ResolvedTune = {
    ...tune,
    stage: stageId,
    study: tune.study ?? ctx.experiment,
    objective: { metric: tune.objective.metric, direction },
  };
  return { tune: resolved, problems, warnings };
}

function paramProblems(key: string, p: SearchParam, schema: object): TuneProblem[] {
  const at = ['tune', 'space', key];
  const check = (value: unknown) => validateOverrides({ [key]: value as never }, schema)[0];
  const unknown = check(p.type === 'categorical' ? p.choices[0] : p.low);
  if (unknown?.message.startsWith('unknown'))
    return [{ path: at, message: unknown.message, expected: unknown.expected, found: unknown.found }];
  const out: TuneProblem[] = [];
  const typeCheck = (value: unknown, field: string) => {
    const q = check(value);
    if (q) out.push({ path: [...at, field], message: q.message, expected: q.expected, found: q.found });
  };
  if (p.type === 'categorical') {
    p.choices.forEach((c, i) => typeCheck(c, `choices.${i}`));
    if (new Set(p.choices.map((c) => JSON.stringify(c))).size !== p.choices.length)
      out.push({ path: [...at, 'choices'], message: 'a choice is listed twice' });
    return out;
  }
  if (!(p.low < p.high))
    out.push({
      path: [...at, 'high'],
      message: `the range [${p.low}, ${p.high}] is empty or a single value`,
      expected: `high > low (${p.low})`,
      found: String(p.high),
    });
  if (p.log && p.low <= 0)
    out.push({ path: [...at, 'low'], message: 'a log-scale range needs low > 0', expected: '> 0', found: String(p.low) });
  if (p.type === 'int' && p.log && p.step !== 1)
    out.push({ path: [...at, 'step'], message: 'a log-scale int range samples with step 1', expected: '1', found: String(p.step) });
  const before = out.length;
  typeCheck(p.low, 'low');
  typeCheck(p.high, 'high');
  if (out.length === before && p.type === 'float' && p.low < p.high) {
    // Sampled floats are fractional: an integer key needs type int.
    const probe = Number.isInteger((p.low + p.high) / 2) ? p.low + (p.high - p.low) / 4 + 1e-3 : (p.low + p.high) / 2;
    if (check(probe))
      out.push({ path: [...at, 'type'], message: `${key} takes whole numbers: use type: int`, expected: 'int', found: 'float' });
  }
  return out;
}

function prunerProblems(p: PrunerSpec): TuneProblem[] {
  if (p.type !== 'hyperband') return [];
  if (p.minResource > p.maxResource)
    return [
      {
        path: ['tune', 'pruner', 'minResource'],
        message: `minResource ${p.minResource} is above maxResource ${p.maxResource}`,
        expected: `<= ${p.maxResource}`,
        found: String(p.minResource),
      },
    ];
  return [];
}
