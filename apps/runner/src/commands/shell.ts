// `runner shell`: its flags read and refused, then an interactive allocation on the site in a
// stage's environment (openShell of @kdgat/runs: the stage, its resources and charge, the site, the
// init put on scratch; rendered by renderInteractiveShell of @kdgat/slurm-templates).
import { SCRIPT_VALUES, matchesRule } from '@kdgat/config';
import { openShell, type ShellFlags } from '@kdgat/runs';
import { REPO_ROOT, UsageError, stackConfigs, stackSource, type Command, type Flags } from './kit.ts';

/** The resource flags as values: each refused naming the flag, the value and what was expected. */
export function shellFlags(values: Flags): ShellFlags {
  const int = (flag: string, v: string | undefined, min: number): number | undefined => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < min)
      throw new UsageError(`--${flag} ${v}: expected a whole number${min > 0 ? ` >= ${min}` : ' >= 0'}`);
    return n;
  };
  const mem = values['mem-gb'];
  if (mem !== undefined && !(/^\d+(\.\d+)?$/.test(mem) && Number(mem) > 0))
    throw new UsageError(`--mem-gb ${mem}: expected a number of GB > 0, such as 8 or 12.5`);
  const time = values.time;
  if (time !== undefined && !matchesRule(SCRIPT_VALUES.slurmTime, time))
    throw new UsageError(`--time ${time}: expected ${SCRIPT_VALUES.slurmTime.expected}`);
  const partition = values.partition;
  if (partition !== undefined && !matchesRule(SCRIPT_VALUES.name, partition))
    throw new UsageError(`--partition ${partition}: expected ${SCRIPT_VALUES.name.expected}`);
  const cpus = int('cpus', values.cpus, 1);
  const gpus = int('gpus', values.gpus, 0);
  return {
    ...(partition !== undefined ? { partition } : {}),
    ...(cpus !== undefined ? { cpus } : {}),
    ...(mem !== undefined ? { memGB: Number(mem) } : {}),
    ...(gpus !== undefined ? { gpus } : {}),
    ...(time !== undefined ? { time } : {}),
  };
}

export const shellCommand: Command = async (ctx) => {
  const { values } = ctx;
  if (values.stage !== undefined && values.spec === undefined)
    throw ctx.usage('--stage names a stage of a spec: pass --spec FILE.yaml too');
  if (values.scheduler && values.scheduler !== 'slurm' && values.scheduler !== 'local')
    throw ctx.usage(`--scheduler ${values.scheduler}: expected slurm or local`);
  return openShell({
    stack: values.stack ?? 'local',
    stackSource: stackSource(values),
    ...(values.spec ? { specPath: values.spec } : {}),
    ...(values.stage ? { stageId: values.stage } : {}),
    ...(values.cluster !== undefined ? { cluster: values.cluster } : {}),
    flags: shellFlags(values),
    ...(values.scheduler ? { scheduler: values.scheduler as 'slurm' | 'local' } : {}),
    allowDirty: values['allow-dirty'] === true,
    repoRoot: REPO_ROOT,
    configs: stackConfigs(values),
    terminal: () => process.stdin.isTTY === true,
    log: ctx.say,
  });
};
