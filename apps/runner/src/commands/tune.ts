// `runner tune`: train with the spec's tune: stage planned as one array of study workers. The
// study's name is refused when taken, study.json is written with the scripts, and after the
// submit the name links to the run's study dir. `--dry-run` stops after the preflight.
import { join } from 'node:path';
import { linkStudy, refuseTakenStudy, runTuneReport, studyDirOf, writeStudyFile } from '@kdgat/planning';
import { acquireLock, localView, refuseActiveRuns, RUNS_LOCK_FILE } from '@kdgat/run-record';
import { runOptions, type Command } from '../cli/args.ts';
import { follow } from './follow.ts';
import { printRun } from './output.ts';
import {
  checkSpec,
  checkStack,
  loadSpec,
  newRun,
  planRun,
  preflight,
  reproduce,
  resultOf,
  schedulerOf,
  submit,
  type RunOptions,
  type RunResult,
} from './steps.ts';

export async function tune(opts: RunOptions & { dryRun?: boolean }): Promise<RunResult> {
  const log = opts.log ?? (() => {});
  const spec = await loadSpec(opts, log);
  const tuning = spec.resolved.tune;
  if (!tuning)
    throw new Error(
      `${spec.file} has no tune: section: add one (see examples/tune-vgae.yaml) or use \`nx run runner:train\``,
    );
  checkSpec(spec, log);
  const site = await checkStack(spec, opts, log);
  const scheduler = schedulerOf(spec, site, opts);
  const options = { tune: tuning, rightSize: opts.rightSize === true };
  const planned = await planRun(spec, site, scheduler, options, log);
  const reproduction = reproduce(spec, site, planned, scheduler);
  const lock = opts.dryRun ? undefined : await acquireLock(join(site.runsRoot, RUNS_LOCK_FILE));
  try {
    const { name: experiment } = spec.resolved.spec;
    refuseTakenStudy(site.runsRoot, tuning.study);
    if (!opts.dryRun && !opts.force)
      await refuseActiveRuns(site.runsRoot, experiment, spec.resolved.specHash);
    const { record, rendered } = await newRun(spec, site, planned, scheduler, opts, log, (outDir, runDir) => {
      writeStudyFile(outDir, spec.resolved, tuning, runDir);
      return { study: { name: tuning.study, dir: studyDirOf(runDir) } };
    });
    const study = { name: tuning.study, dir: studyDirOf(record.manifest.runDir) };
    const reports = await preflight(record, rendered, scheduler, site);
    if (!opts.dryRun) {
      await submit(record, rendered, scheduler);
      // The name points at the study where this machine reads it: on a site over SSH, the local copy.
      linkStudy(site.runsRoot, study.name, site.files ? join(record.dir, 'study') : study.dir);
    }
    return resultOf(record, planned, reports, scheduler, { reproduction, study });
  } finally {
    lock?.release();
  }
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
