// `runner init [DIR]`: a starting workspace for an existing repository (@kdgat/config's initWorkspace
// reads the repository and writes the files); this prints what it found and what is left to fill.
import { resolve } from 'node:path';
import { TODO, initWorkspace } from '@kdgat/config';
import type { Command } from './kit.ts';

export const initCommand: Command = async (ctx) => {
  if (ctx.positionals.length > 2)
    throw ctx.usage(`init takes one directory, not ${ctx.positionals.length - 1}`);
  const root = resolve(ctx.positionals[1] ?? ctx.values.workspace ?? '.');
  const { detected: d, files } = initWorkspace(root);
  const found = [
    `project ${d.name}${d.python ? ` (Python ${d.python})` : ''}`,
    d.lock ? `its ${d.lock}` : d.requirements ? `its ${d.requirements}` : 'no lock',
    d.cliModule ? `CLI python -m ${d.cliModule} (${d.cliFile})` : 'no CLI module',
    ...(d.lightning ? ['Lightning'] : []),
    ...(d.csvLogger ? ['its CSVLogger'] : []),
    ...(d.checkpointDir ? [`ModelCheckpoint in ${d.checkpointDir}/`] : []),
    ...(d.rawDataVariable ? [`raw data through $${d.rawDataVariable}`] : []),
  ];
  ctx.say(`workspace ${root}: found ${found.join(', ')}`);
  for (const f of files) ctx.say(`  wrote ${f.path}${f.todos > 0 ? ` (${f.todos} ${TODO} to fill)` : ''}`);
  const todos = files.reduce((n, f) => n + f.todos, 0);
  ctx.say(
    todos > 0
      ? `next: fill the ${todos} lines marked ${TODO} (grep -rn '${TODO}' ${root}), then kdgat-runner plan --spec hpc/specs/${d.name}.yaml`
      : `next: kdgat-runner plan --spec hpc/specs/${d.name}.yaml`,
  );
  return 0;
};
