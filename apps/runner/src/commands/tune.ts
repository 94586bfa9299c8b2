// `runner tune`: the run's phases (runPipeline of @kdgat/runs) with the spec's tune: stage planned as one
// array of study workers. The study's name is refused when taken, study.json is written with the
// scripts, and after the submit the name links to the run's study dir. `--dry-run` stops after the
// preflight.
import { join } from 'node:path';
import { linkStudy, refuseTakenStudy, runTuneReport, studyDirOf, writeStudyFile } from '@kdgat/planning';
import { localView } from '@kdgat/run-record';
import { runOptions, type Command } from './kit.ts';
import {
  follow,
  runPipeline,
  type RunOptions,
  type RunResult,
  type Spec,
  type StudyHooks,
} from '@kdgat/runs';
import { printRun } from './output.ts';

export function tune(opts: RunOptions & { dryRun?: boolean }): Promise<RunResult> {
  return runPipeline(opts, { dryRun: opts.dryRun === true, studyOf });
}

/** The spec's study: refused without a tune: section. */
function studyOf(spec: Spec): StudyHooks {
  const tuning = spec.resolved.tune;
  if (!tuning)
    throw new Error(
      `${spec.file} has no tune: section: add one (see examples/tune-vgae.yaml) or use \`nx run runner:train\``,
    );
  return {
    tune: tuning,
    guard: (site) => refuseTakenStudy(site.runsRoot, tuning.study),
    write: (sized, outDir, runDir) => {
      writeStudyFile(outDir, sized.resolved, tuning, runDir);
      return { name: tuning.study, dir: studyDirOf(runDir) };
    },
    // The name points at the study where this machine reads it: on a site over SSH, the local copy.
    submitted: (site, record) =>
      linkStudy(
        site.runsRoot,
        tuning.study,
        site.files ? join(record.dir, 'study') : studyDirOf(record.manifest.runDir),
      ),
  };
}

export const tuneCommand: Command = async (ctx) => {
  const { values, say } = ctx;
  const dryRun = values['dry-run'] === true;
  const result = await tune({
    ...runOptions(ctx),
    force: values.force === true,
    rightSize: values['right-size'] === true,
    allowDirty: values['allow-dirty'] === true,
    dryRun,
  });
  printRun(result, { dryRun }, say);
  if (dryRun) return 0;
  say(`study ${result.study!.name}: ${result.study!.dir}`);
  say(`  report: nx run runner:tune-report --study ${result.study!.name}`);
  if (!values.wait) return 0;
  const status = await follow(result.record, ctx.io);
  say('');
  // The study's journal as --wait left it: on this machine, in the run's (local copy of its) dir.
  const studyDir = localView(result.manifest, result.record.dir).tune?.studyDir ?? result.study!.dir;
  say(await runTuneReport(result.manifest.stack.outputs, studyDir, { json: false, plots: true }));
  return status;
};
