// `runner infra <preview|up|refresh|destroy> [--stack NAME]`: the workspace's stack through the tool's
// own Pulumi program (infra/bin/pulumi-stack.sh: the stack file, its state, always --diff), from any
// directory of a researcher's repository.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { WORKSPACE_VARIABLE } from '@kdgat/config';
import { REPO_ROOT, workspaceOf, type Command } from './kit.ts';

const VERBS = ['preview', 'up', 'refresh', 'destroy'];

export const infraCommand: Command = async (ctx) => {
  const verb = ctx.positionals[1];
  if (verb === undefined || !VERBS.includes(verb))
    throw ctx.usage(`infra ${verb ?? ''}: expected one of ${VERBS.join(', ')}`.replace('  ', ' '));
  const ws = workspaceOf(ctx.values);
  const r = spawnSync(
    'bash',
    [
      join(REPO_ROOT, 'infra', 'bin', 'pulumi-stack.sh'),
      verb,
      '--stack',
      ctx.values.stack ?? 'local',
      ...ctx.positionals.slice(2),
    ],
    { stdio: 'inherit', env: { ...process.env, [WORKSPACE_VARIABLE]: ws.root } },
  );
  if (r.error) throw r.error;
  return r.status ?? 1;
};
