// `runner runs`: the table of all runs of a stack (the catalogue: one row per finished stage, array
// task and study trial), filtered and sorted — a leaderboard. A local stack's catalogue is read where
// it is; a site's over SSH is brought back into the local runs root first. The pipeline's own reader
// prints it (the `runs` site helper: the --where language, the columns).
import { catalogueOfRunsRoot, pullCatalogue, runsTable } from '@kdgat/run-record';
import { SiteFiles, sessionFor } from '@kdgat/transport';
import { localRunsRoot } from '@kdgat/runs';
import { stackSource, workspaceOf, type Command, type CommandContext } from './kit.ts';

/** The flags of `runs`, checked before the stack is read (their grammar is the pipeline's: it says what is wrong). */
export function runsQuery(ctx: CommandContext): {
  where?: string;
  sort?: string;
  columns?: string;
  json: boolean;
} {
  const { values, positionals } = ctx;
  if (positionals.length > 1)
    throw ctx.usage(
      `runs takes no run directory (${positionals[1]}): it lists every run of the stack; choose with --where, e.g. --where run_id=<utc>-<hash>`,
    );
  for (const flag of ['where', 'sort', 'columns'] as const) {
    const v = values[flag];
    if (v !== undefined && v.trim() === '') throw ctx.usage(`--${flag} is empty`);
  }
  return {
    ...(values.where !== undefined ? { where: values.where } : {}),
    ...(values.sort !== undefined ? { sort: values.sort } : {}),
    ...(values.columns !== undefined ? { columns: values.columns } : {}),
    json: values.json === true,
  };
}

export const runsCommand: Command = async (ctx) => {
  const query = runsQuery(ctx);
  const name = ctx.values.stack ?? 'local';
  const stack = await stackSource(ctx.values).read(name);
  let catalogue = catalogueOfRunsRoot(stack.scratch.runsDir);
  if (stack.connection.kind === 'ssh') {
    catalogue = catalogueOfRunsRoot(localRunsRoot(workspaceOf(ctx.values), name));
    const files = new SiteFiles(sessionFor(stack.connection));
    const copy = await pullCatalogue(files, stack.scratch.runsDir, catalogue);
    ctx.io.err.write(
      copy.error
        ? `the site could not be reached (${copy.error}): showing the local copy ${catalogue}\n`
        : `catalogue of ${stack.connection.host}:${catalogueOfRunsRoot(stack.scratch.runsDir)}, brought back to ${catalogue}\n`,
    );
  }
  const answer = await runsTable(stack, catalogue, query);
  if (answer.code !== 0) throw ctx.usage(answer.stderr.trim().replace(/^\S+ runs: /, ''));
  ctx.io.out.write(answer.stdout);
  return 0;
};
