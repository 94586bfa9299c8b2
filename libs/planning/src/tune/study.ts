// Studies on disk: `<runsDir>/studies/<name>` links to the `study/` dir of the run that created it
// (study.json, journal.log, trials/, report/). The numbers come from the pipeline's own
// the site helper `tune-report`, run with the stack's environment: one reader of the journal.
import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import {
  validateStudyConfig,
  type ResolvedExperiment,
  type ResolvedTune,
  type Scalar,
  type StudyConfig,
  SITE_HELPER_MODULE,
} from '@kdgat/config';
import { runCommand } from '@kdgat/schedulers';
import type { StackOutputs } from '../stack/outputs.ts';
import { pythonOf } from '../stack/python.ts';

export const STUDIES_DIR = 'studies';
export const STUDY_FILE = 'study.json';

export function studyLink(runsRoot: string, study: string): string {
  return join(runsRoot, STUDIES_DIR, study);
}

/** A study directory from a study name (looked up in the stack's runs dir) or a directory path. */
export function resolveStudyDir(arg: string, runsRoot: string): string {
  if (/[/]/.test(arg) || arg === '.' || arg === '..') {
    const dir = resolve(arg);
    if (!existsSync(join(dir, STUDY_FILE)))
      throw new Error(
        `--study ${arg}: ${dir} has no ${STUDY_FILE}; expected a study directory or a study name`,
      );
    return dir;
  }
  const link = studyLink(runsRoot, arg);
  if (!existsSync(link))
    throw new Error(
      `--study ${arg}: no study of that name in ${dirname(link)}; start one with \`nx run runner:tune --spec <yaml>\``,
    );
  return realpathSync(link);
}

/** Where a study name points now, if anywhere (a dangling link counts: the name is taken). */
export function existingStudy(runsRoot: string, study: string): string | undefined {
  const link = studyLink(runsRoot, study);
  try {
    return lstatSync(link).isSymbolicLink() ? readlinkSync(link) : link;
  } catch {
    return undefined;
  }
}

/** study.json: what each worker reads (camelCase), checked against the schema the workers validate it with. */
export function studyConfig(resolved: ResolvedExperiment, tune: ResolvedTune, runDir: string): StudyConfig {
  const stage = resolved.stages.find((s) => s.id === tune.stage);
  if (!stage) throw new Error(`tune.stage ${tune.stage} is not a stage of the experiment`);
  return validateStudyConfig({
    study: tune.study,
    experiment: resolved.spec.name,
    stageId: stage.id,
    stage: stage.stage,
    model: stage.model,
    scale: stage.scale,
    dataset: stage.dataset,
    overrides: stage.overrides,
    space: tune.space,
    objective: tune.objective,
    nTrials: tune.nTrials,
    nWorkers: tune.nWorkers,
    pruner: tune.pruner,
    sampler: tune.sampler,
    heartbeatSeconds: tune.heartbeatSeconds,
    staleAfterSeconds: tune.staleAfterSeconds,
    maxRetries: tune.maxRetries,
    inputsRoot: join(runDir, 'outputs'),
    runDir,
  });
}

export interface BestTrial {
  number: number;
  value: number;
  params: Record<string, Scalar>;
}

export interface StudyReport {
  study: string;
  objective_metric: string;
  direction: string;
  counts: Record<string, number>;
  best: (BestTrial & Record<string, unknown>) | null;
  plots?: string[];
  [key: string]: unknown;
}

/** The site helper `tune-report`: the text, or the parsed report with `json`. */
export async function runTuneReport(
  stack: StackOutputs,
  studyDir: string,
  opts: { json: true; plots: boolean },
): Promise<StudyReport>;
export async function runTuneReport(
  stack: StackOutputs,
  studyDir: string,
  opts: { json: false; plots: boolean },
): Promise<string>;
export async function runTuneReport(
  stack: StackOutputs,
  studyDir: string,
  opts: { json: boolean; plots: boolean },
): Promise<StudyReport | string> {
  const python = pythonOf(stack);
  if (!existsSync(python))
    throw new Error(
      `no python at ${python} (the environment of the stack's outputs): run \`nx run infra:up\`, or set HPC_PYTHON`,
    );
  const args = ['-m', SITE_HELPER_MODULE, 'tune-report', '--study-dir', studyDir];
  if (opts.json) args.push('--json');
  if (!opts.plots) args.push('--no-plots');
  const r = await runCommand(python, args, { env: { ...process.env, MPLBACKEND: 'Agg' } });
  if (r.code !== 0)
    throw new Error(
      `python -m ${SITE_HELPER_MODULE} tune-report failed (exit ${r.code}):\n${r.stderr.trim() || r.stdout.trim()}`,
    );
  return opts.json ? (JSON.parse(r.stdout) as StudyReport) : r.stdout;
}
