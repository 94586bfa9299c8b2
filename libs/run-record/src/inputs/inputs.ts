// Stages that start from an earlier run's outputs (`inputs:` in a stage): find that run, check
// with @kdgat/config's rules that its outputs exist and match this run's data set and graph
// cache, and link them into the new run's run roots where the pipeline looks for them.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  symlinkSync,
} from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import {
  loadPipelineSchema,
  runDirName,
  runDirPath,
  stageInputProblems,
  type CacheIdentity,
  type EarlierOutput,
  type ResolvedExperiment,
  type Scalar,
} from '@kdgat/config';
import { MANIFEST_FILE, readManifest, type Manifest } from '../manifest.ts';
import { localView } from '../site/site-copy.ts';
import type { StackOutputs } from '@kdgat/planning';

/**
 * A site over SSH: earlier runs are read from this machine's copies of them (brought back first),
 * the site's graph caches from what the site said, and what is recorded and linked is the site's.
 */
export interface SiteCopies {
  /** Where the copies of the site's runs dir are (`stack.scratch.runsDir` on the site). */
  runsRoot: string;
  /** meta.json of each data set's graph cache on the site (absent: no cache there). */
  cacheMeta: Readonly<Record<string, CacheIdentity | undefined>>;
}

/** One input as recorded in the manifest. */
export interface ResolvedInput {
  /** The stage of this run that reads it. */
  stageId: string;
  /** As the spec says it (`run:`), and what it resolved to. */
  run: string;
  runDir: string;
  /** The stage id in that run. */
  stage: string;
  /** The output directory read (`<run root>/<dataset>/<model>_<scale>_<stage>`), real path. */
  dir: string;
  /** Where it appears in this run, relative to the run dir (one per sweep point). */
  linkedAs: string[];
  graphCache: CacheIdentity;
}

export class StageInputError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`inputs from earlier runs refused; nothing was submitted:\n  ${problems.join('\n  ')}`);
    this.name = 'StageInputError';
    this.problems = problems;
  }
}

interface StageOfRun {
  id: string;
  stage: string;
  model: string;
  scale: string;
  dataset: string;
}

const readJson = <T>(p: string): T | undefined => {
  try {
    return JSON.parse(readFileSync(p, 'utf8')) as T;
  } catch {
    return undefined;
  }
};

/** The output dir of `stageId` in a recorded run, or why there is none. */
function outputOf(m: Manifest, stageId: string): { dir: string; stage: StageOfRun } | string {
  const stages = ((m.resolved as { stages?: StageOfRun[] }).stages ?? []) as StageOfRun[];
  const stage = stages.find((s) => s.id === stageId);
  const job = m.jobs.find((j) => j.stageId === stageId);
  if (!stage || !job)
    return `run ${m.runDir} has no stage ${stageId} (it has ${stages.map((s) => s.id).join(', ') || 'none'})`;
  if (job.array)
    return `stage ${stageId} of run ${m.runDir} is an array (a sweep or a study): name a run that trained it once`;
  return { dir: join(job.runRoot, runDirPath(stage)), stage };
}

function earlierOutput(where: string, found: { dir: string; stage: StageOfRun }): EarlierOutput {
  const metrics = readJson<EarlierOutput['metrics']>(join(found.dir, 'metrics.json'));
  return {
    where,
    dataset: found.stage.dataset,
    dir: found.dir,
    ...(metrics ? { metrics } : {}),
    modelFile: existsSync(join(found.dir, 'model.pt')),
  };
}

/**
 * The manifest a `run:` names: a run dir or manifest.json (absolute, or relative to the runs dir),
 * or an experiment name, whose latest run with `stage` finished is taken.
 */
function findRun(run: string, stage: string, runsDir: string, copies?: SiteCopies): Manifest | string {
  const read = (dir: string): Manifest => (copies ? localView(readManifest(dir), dir) : readManifest(dir));
  const looksLikePath = run.includes('/') || run.endsWith('.json');
  if (looksLikePath) {
    const p = isAbsolute(run) ? run : resolve(runsDir, run);
    const dir = p.endsWith('.json') ? dirname(p) : p;
    if (!existsSync(join(dir, MANIFEST_FILE))) return `run ${run}: no ${MANIFEST_FILE} in ${dir}`;
    try {
      return read(dir);
    } catch (e) {
      return `run ${run}: ${(e as Error).message}`;
    }
  }
  const expDir = join(runsDir, run);
  const runs = existsSync(expDir)
    ? readdirSync(expDir)
        .filter((d) => existsSync(join(expDir, d, MANIFEST_FILE)))
        .sort()
        .reverse()
    : [];
  for (const d of runs) {
    let m: Manifest;
    try {
      m = read(join(expDir, d));
    } catch {
      continue;
    }
    const out = outputOf(m, stage);
    if (typeof out === 'string') continue;
    const metrics = readJson<{ status?: string }>(join(out.dir, 'metrics.json'));
    if (metrics?.status === 'complete') return m;
  }
  return runs.length === 0
    ? `run ${run}: no run of experiment ${run} in ${runsDir} (name a run directory, its manifest.json, or an experiment that has run here)`
    : `run ${run}: none of the ${runs.length} run(s) of experiment ${run} in ${expDir} has a finished stage ${stage}`;
}

/**
 * Resolves and checks every stage input of `resolved` against the stack's runs and caches.
 * `pinned` (from a manifest being reproduced): `<stageId>#<stage>` → the run dir used then.
 */
export function resolveStageInputs(
  resolved: ResolvedExperiment,
  stack: StackOutputs,
  pinned: ReadonlyMap<string, string> = new Map(),
  copies?: SiteCopies,
): ResolvedInput[] {
  const siteRuns = stack.scratch.runsDir.replace(/\/+$/, '');
  // Paths as this machine reads them, and back as the site has them.
  const here = (p: string) =>
    copies && (p === siteRuns || p.startsWith(`${siteRuns}/`))
      ? copies.runsRoot + p.slice(siteRuns.length)
      : p;
  const there = (p: string) =>
    copies && (p === copies.runsRoot || p.startsWith(`${copies.runsRoot}/`))
      ? siteRuns + p.slice(copies.runsRoot.length)
      : p;
  const problems: string[] = [];
  const out: ResolvedInput[] = [];
  const points = resolved.sweepPoints as Record<string, Scalar>[];
  for (const stage of resolved.stages) {
    for (const input of stage.inputs ?? []) {
      const at = `stage ${stage.id}, input ${input.stage} of run ${input.run}`;
      const run = pinned.get(`${stage.id}#${input.stage}`) ?? input.run;
      const m = findRun(here(run), input.stage, copies ? copies.runsRoot : stack.scratch.runsDir, copies);
      if (typeof m === 'string') {
        problems.push(`${at}: ${m}`);
        continue;
      }
      const found = outputOf(m, input.stage);
      if (typeof found === 'string') {
        problems.push(`${at}: ${found}`);
        continue;
      }
      const linkName = basename(found.dir);
      const own = resolved.stages.find((s) => s.dataset === stage.dataset && runDirName(s) === linkName);
      if (own) {
        problems.push(
          `${at}: stage ${own.id} of this run writes the same outputs (${stage.dataset}/${linkName}): take them from one place`,
        );
        continue;
      }
      const earlier = earlierOutput(`run ${m.runDir} stage ${input.stage}`, found);
      const cacheDir = stack.scratch.cacheDirs[stage.dataset];
      const current = copies
        ? copies.cacheMeta[stage.dataset]
        : cacheDir
          ? readJson<CacheIdentity>(join(cacheDir, 'meta.json'))
          : undefined;
      const issues = stageInputProblems(stage, earlier, {
        currentCache: current?.params_digest ? current : undefined,
        cacheBuiltHere: resolved.stages.some((s) => s.stage === 'preprocess' && s.dataset === stage.dataset),
        points,
        pipelineSchema: loadPipelineSchema(),
      });
      if (issues.length > 0) {
        problems.push(...issues.map((i) => `${at}: ${i}`));
        continue;
      }
      const roots = points.length > 0 ? points.map((_, i) => join('outputs', `point_${i}`)) : ['outputs'];
      out.push({
        stageId: stage.id,
        run: input.run,
        runDir: there(m.runDir),
        stage: input.stage,
        dir: copies ? there(found.dir) : realpathSync(found.dir),
        linkedAs: roots.map((r) => join(r, stage.dataset, linkName)),
        graphCache: earlier.metrics!.graph_cache!,
      });
    }
  }
  if (problems.length > 0) throw new StageInputError(problems);
  return out;
}

function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Links each input's output dir into the new run where the pipeline looks for it. */
export function linkStageInputs(runDir: string, inputs: readonly ResolvedInput[]): void {
  for (const input of inputs) {
    for (const rel of input.linkedAs) {
      const link = join(runDir, rel);
      // Two stages of this run read the same earlier output. (lstat: in the local copy of a run on a
      // site over SSH the link points at the site's path, which does not exist here.)
      if (isLink(link) || existsSync(link)) continue;
      mkdirSync(dirname(link), { recursive: true });
      symlinkSync(input.dir, link, 'dir');
    }
  }
}
