// `runner plan`: train's steps up to the preflight — load spec → check stack → plan → render →
// record → preflight — and nothing submitted. A stack not provisioned yet is planned from its
// declared configuration (written under .hpc/plans/, sbatch --test-only skipped, saying why).
import { newRunDir } from '@kdgat/run-record';
import { runOptions, type Command } from '../cli/args.ts';
import { printRun } from './output.ts';
import {
  checkSpec,
  checkStack,
  loadSpec,
  planRun,
  preflight,
  recordRun,
  render,
  reproduce,
  resultOf,
  schedulerOf,
  writeRun,
  type RunOptions,
  type RunResult,
} from './steps.ts';

export async function plan(opts: RunOptions): Promise<RunResult> {
  const log = opts.log ?? (() => {});
  const spec = await loadSpec(opts, log);
  if (spec.resolved.tune)
    log(`note: the spec's tune: section is ignored by train (\`nx run runner:tune\` runs the study)`);
  checkSpec(spec, log);
  const site = await checkStack(spec, { ...opts, dryRun: true }, log);
  const scheduler = schedulerOf(spec, site, opts);
  const planned = await planRun(spec, site, scheduler, { rightSize: opts.rightSize === true }, log);
  const reproduction = reproduce(spec, site, planned, scheduler);
  const runDir = newRunDir(site.runsRoot, spec.resolved.spec.name, spec.resolved.specHash);
  const rendered = render(spec, site, planned, scheduler, runDir);
  const written = writeRun(site, runDir, rendered, opts.repoRoot, log);
  const record = await recordRun(spec, site, planned, written, { runDir, rendered, scheduler }, opts);
  const reports = await preflight(record, rendered, scheduler);
  return resultOf(record, planned, reports, scheduler, { reproduction });
}

export const planCommand: Command = async (ctx) => {
  const { values } = ctx;
  const result = await plan({
    ...runOptions(ctx),
    force: values.force === true,
    rightSize: values['right-size'] === true,
  });
  printRun(result, { dryRun: true }, ctx.say);
  return 0;
};
