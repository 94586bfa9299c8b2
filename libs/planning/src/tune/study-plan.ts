// `runner tune`: a plan variant. The tuned stage runs as the study's workers (one array task per
// worker, all on one study dir); study.json goes into the run, and after submission the study's
// name links to it. A name already taken is refused before anything is queued.
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ResolvedExperiment, ResolvedTune } from '@kdgat/config';
import type { RunPlan } from '../build.ts';
import { STUDY_FILE, existingStudy, studyConfig, studyLink } from './study.ts';

export class StudyExistsError extends Error {
  constructor(study: string, where: string) {
    super(
      `study ${study} already exists (${where}): choose another tune.study, or see it with \`nx run runner:tune-report --study ${study}\``,
    );
    this.name = 'StudyExistsError';
  }
}

/** The plan with the tuned stage as one array of `nWorkers` study workers. */
export function asStudyPlan(plan: RunPlan, tune: ResolvedTune): RunPlan {
  const job = plan.jobs.find((j) => j.stageId === tune.stage);
  if (!job) throw new Error(`tune.stage ${tune.stage} is not a stage of the plan`);
  job.array = { size: tune.nWorkers, concurrency: tune.nWorkers, firstPoint: 0 };
  job.tune = { workers: tune.nWorkers };
  return plan;
}

/** A run's study dir (in the scripts and study.json: the run dir on the site). */
export function studyDirOf(runDir: string): string {
  return join(runDir, 'study');
}

export function refuseTakenStudy(runsRoot: string, study: string): void {
  const previous = existingStudy(runsRoot, study);
  if (previous !== undefined) throw new StudyExistsError(study, previous);
}

/** Writes `study/study.json` into the directory the run's files are written to. */
export function writeStudyFile(
  outDir: string,
  resolved: ResolvedExperiment,
  tune: ResolvedTune,
  runDir: string,
): void {
  mkdirSync(join(outDir, 'study'), { recursive: true });
  writeFileSync(
    join(outDir, 'study', STUDY_FILE),
    `${JSON.stringify(studyConfig(resolved, tune, runDir), null, 2)}\n`,
  );
}

/** The study's name now points at this run's study dir (tune-report, train --from-study). */
export function linkStudy(runsRoot: string, study: string, studyDir: string): void {
  const link = studyLink(runsRoot, study);
  mkdirSync(dirname(link), { recursive: true });
  rmSync(link, { force: true }); // only a dangling link can be here: refused otherwise, under the lock
  symlinkSync(studyDir, link);
}
