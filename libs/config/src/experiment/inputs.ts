// The rules an earlier run's outputs must meet before a stage of a new run may read them: same
// dataset, finished, and made from the same graph cache (parameters and source files) as the one
// the new stage will read. Pure: the runner reads the files and passes what it found.
import { overrideDefault } from './overrides.ts';
import type { ResolvedStage } from './resolve.ts';
import type { Scalar } from './schema.ts';

/** What the pipeline records of the graph cache a stage read (`metrics.json` → `graph_cache`, and its `meta.json`). */
export interface CacheIdentity {
  params_digest: string;
  source_digest: string;
  params: Record<string, unknown>;
}

/** An earlier run's stage output, as the runner found it on disk. */
export interface EarlierOutput {
  /** `<run dir>#<stage id>`, for messages. */
  where: string;
  dataset: string;
  /** `<run root>/<dataset>/<model>_<scale>_<stage>`: what gets linked. */
  dir: string;
  /** `metrics.json` of that stage, if it exists. */
  metrics?: { status?: string; graph_cache?: CacheIdentity };
  modelFile: boolean;
}

/**
 * Problems (in words a user can act on) of reading `earlier` in `stage`; [] when it may.
 * `currentCache`: the stack's cache of the dataset now (its meta.json), undefined when absent;
 * `cacheBuiltHere`: a preprocess stage of the new run builds that cache first.
 * `points`: the sweep points of the new run (each may change graph parameters).
 */
export function stageInputProblems(
  stage: Pick<ResolvedStage, 'id' | 'dataset' | 'overrides'>,
  earlier: EarlierOutput,
  opts: {
    currentCache: CacheIdentity | undefined;
    cacheBuiltHere: boolean;
    points: readonly Record<string, Scalar>[];
    pipelineSchema: object;
  },
): string[] {
  const problems: string[] = [];
  const from = `${earlier.where} (${earlier.dir})`;
  if (earlier.dataset !== stage.dataset)
    problems.push(
      `${from} was made from dataset ${earlier.dataset}, but stage ${stage.id} reads ${stage.dataset}`,
    );
  if (earlier.metrics?.status !== 'complete' || !earlier.modelFile) {
    problems.push(
      `${from} has not finished: ${earlier.metrics ? `metrics.json says status ${JSON.stringify(earlier.metrics.status)}` : 'no metrics.json'}${earlier.modelFile ? '' : ', no model.pt'}`,
    );
    return problems;
  }
  const made = earlier.metrics.graph_cache;
  if (!made) {
    problems.push(
      `${from} does not record the graph cache it was trained on (metrics.json has no cache digest; it predates that record): run that stage again`,
    );
    return problems;
  }
  // The graph parameters this stage will ask for (the pipeline's defaults, the stage's overrides,
  // a sweep point's) against those the earlier model was trained on.
  for (const point of opts.points.length > 0 ? opts.points : [{}]) {
    for (const [name, value] of Object.entries(made.params)) {
      const key = `data.${name}`;
      const wanted = point[key] ?? stage.overrides[key] ?? overrideDefault(key, opts.pipelineSchema);
      if (wanted === undefined) continue; // not a setting of the pipeline config (fixed in the cache code)
      if (wanted !== value)
        problems.push(
          `${from} was trained on graphs with ${key} = ${JSON.stringify(value)}, but stage ${stage.id} uses ${JSON.stringify(wanted)}${Object.keys(point).length ? ` (sweep point ${JSON.stringify(point)})` : ''}`,
        );
    }
  }
  const now = opts.currentCache;
  if (now) {
    if (now.params_digest !== made.params_digest)
      problems.push(
        `${from} was trained on a graph cache with parameter digest ${made.params_digest.slice(0, 12)}, but the cache of ${stage.dataset} here has ${now.params_digest.slice(0, 12)}`,
      );
    if (now.source_digest !== made.source_digest)
      problems.push(
        `${from} was trained on other source files of ${stage.dataset} (digest ${made.source_digest.slice(0, 12)}) than the cache here holds (${now.source_digest.slice(0, 12)}): the data set changed since`,
      );
  } else if (!opts.cacheBuiltHere) {
    problems.push(
      `there is no graph cache of ${stage.dataset} to check ${from} against (and stage ${stage.id} would have nothing to read): run a preprocess stage for ${stage.dataset} first`,
    );
  }
  return [...new Set(problems)];
}
