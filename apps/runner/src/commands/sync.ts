// `runner sync RUN_DIR`: uploads what the run's jobs tracked offline (W&B on compute nodes, which have
// no network) with the site helper `tracking-sync --run-dir <run dir>`, run where there is a network:
// on a site over SSH on the login node, through the command's SSH master; on a local stack here. It
// runs in the environment of the run (or of `--stage ID`), activated as the stack outputs say, with the
// run's code snapshot first on PYTHONPATH as in its jobs.
import { syncTracking } from '@kdgat/run-record';
import { openRun, type Command, type CommandContext } from './kit.ts';

/** The command's flags, refused before anything is read or run. */
export function syncFlags(ctx: CommandContext): { run: string; stage?: string } {
  const { values, positionals } = ctx;
  const run = values.run ?? positionals[1];
  if (run === undefined) throw ctx.usage('name the run: sync RUN_DIR [--stack S] [--stage ID]');
  if (positionals.length > 2) throw ctx.usage(`sync takes one run directory, not ${positionals.length - 1}`);
  return { run, ...(values.stage !== undefined ? { stage: values.stage } : {}) };
}

export const syncCommand: Command = async (ctx) => {
  const flags = syncFlags(ctx);
  const { record } = await openRun(ctx, { refresh: false });
  const { manifest } = record;
  const stack = ctx.values.stack;
  if (stack !== undefined && stack !== manifest.stack.name)
    throw ctx.usage(`--stack ${stack}: the run ${record.dir} ran on stack ${manifest.stack.name}`);
  if (flags.stage !== undefined && !manifest.jobs.some((j) => j.stageId === flags.stage))
    throw ctx.usage(
      `--stage ${flags.stage}: not a stage of the run (its stages: ${[...new Set(manifest.jobs.map((j) => j.stageId))].join(', ')})`,
    );
  const r = await syncTracking(manifest, flags.stage);
  ctx.say(`tracking-sync of ${manifest.runDir} on ${r.target} (environment ${r.environment}):`);
  if (r.stdout) ctx.io.out.write(r.stdout.endsWith('\n') ? r.stdout : `${r.stdout}\n`);
  if (r.stderr) ctx.io.err.write(r.stderr.endsWith('\n') ? r.stderr : `${r.stderr}\n`);
  if (r.code === 0 && !r.timedOut) return 0;
  ctx.io.err.write(
    `kdgat-runner: tracking-sync on ${r.target} ${r.timedOut ? 'timed out' : `exited with status ${r.code}`}\n`,
  );
  return 1;
};
