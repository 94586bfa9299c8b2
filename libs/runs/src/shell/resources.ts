// The resources of `runner shell`'s allocation: a stage's own (or modest defaults on the profile's
// default partition) with the flags over them, checked against the partition before anything is
// asked of SLURM; and what it charges if held to its time limit, figured as `plan` figures a task.
import {
  parseSlurmTime,
  type ClusterProfile,
  type Partition,
  type ResolvedStage,
  type Resources,
} from '@kdgat/config';
import { estimateCost, formatHours, formatUnits } from '@kdgat/usage';
import { UsageError } from '../errors.ts';

/** What a shell without a stage asks for on the profile's default partition, each capped by it. */
export const SHELL_DEFAULTS = { cpus: 2, memGB: 8, time: '01:00:00' } as const;

/** The resource flags, checked. */
export interface ShellFlags {
  partition?: string;
  cpus?: number;
  memGB?: number;
  gpus?: number;
  time?: string;
}

/**
 * The allocation's resources: the stage's (without one, SHELL_DEFAULTS on the profile's default
 * partition) with the flags over them, checked against the partition before anything is asked.
 */
export function shellResources(
  profile: ClusterProfile,
  stage: Pick<ResolvedStage, 'id' | 'resources'> | undefined,
  flags: ShellFlags,
): { resources: Resources; partition: Partition } {
  const partitionName = flags.partition ?? stage?.resources.partition ?? profile.defaultPartition;
  const partition = profile.partitions.find((p) => p.name === partitionName);
  if (!partition)
    throw new UsageError(
      `--partition ${partitionName}: not a partition of cluster profile ${profile.name}; expected one of ${profile.partitions.map((p) => p.name).join(', ')}`,
    );
  const base: Resources = stage?.resources ?? {
    cpus: Math.min(SHELL_DEFAULTS.cpus, partition.coresPerNode),
    memGB: Math.min(SHELL_DEFAULTS.memGB, partition.memPerNodeGB),
    gpus:
      partition.gpusPerNode > 0
        ? { count: 1, ...(partition.gpuType !== undefined ? { type: partition.gpuType } : {}) }
        : { count: 0 },
    nodes: 1,
    ntasksPerNode: 1,
    time:
      parseSlurmTime(SHELL_DEFAULTS.time) <= parseSlurmTime(partition.maxWalltime)
        ? SHELL_DEFAULTS.time
        : partition.maxWalltime,
    partition: partition.name,
    arrayConcurrency: 1,
  };
  const gpuCount = flags.gpus ?? base.gpus.count;
  // Another partition than the stage's: its own GPU type.
  const gpuType = partition.name === base.partition ? base.gpus.type : partition.gpuType;
  const resources: Resources = {
    ...base,
    partition: partition.name,
    cpus: flags.cpus ?? base.cpus,
    memGB: flags.memGB ?? base.memGB,
    time: flags.time ?? base.time,
    gpus: gpuCount > 0 && gpuType !== undefined ? { count: gpuCount, type: gpuType } : { count: gpuCount },
  };
  checkFits(resources, partition, flags, stage?.id);
  return { resources, partition };
}

function checkFits(r: Resources, p: Partition, flags: ShellFlags, stageId: string | undefined): void {
  const field = (flag: keyof ShellFlags, name: string) =>
    flags[flag] !== undefined
      ? `--${name}`
      : `resources.${flag === 'memGB' ? 'memGB' : flag}${stageId ? ` of stage ${stageId}` : ''}`;
  const cores = r.cpus * r.ntasksPerNode;
  if (cores > p.coresPerNode)
    throw new UsageError(
      `${field('cpus', 'cpus')} ${r.cpus}: ${r.cpus} cpus x ${r.ntasksPerNode} task(s) per node do not fit a node of ${p.name}; expected at most ${Math.floor(p.coresPerNode / r.ntasksPerNode)}`,
    );
  if (r.memGB > p.memPerNodeGB)
    throw new UsageError(
      `${field('memGB', 'mem-gb')} ${r.memGB}: more than a node of ${p.name} has; expected at most ${p.memPerNodeGB}`,
    );
  if (r.gpus.count > p.gpusPerNode)
    throw new UsageError(
      `${field('gpus', 'gpus')} ${r.gpus.count}: more GPUs than a node of ${p.name} has; expected at most ${p.gpusPerNode}`,
    );
  if (parseSlurmTime(r.time) > parseSlurmTime(p.maxWalltime))
    throw new UsageError(
      `${field('time', 'time')} ${r.time}: longer than ${p.name} allows; expected at most ${p.maxWalltime}`,
    );
}

/**
 * What the allocation charges if it is held to its time limit, as `plan` figures a stage's task
 * (@kdgat/usage's estimate), and the account it is charged to.
 */
export function chargeLines(profile: ClusterProfile, label: string, resources: Resources): string[] {
  const estimate = estimateCost(profile, [{ id: label, tasks: 1, resources }]);
  const st = estimate.stages[0]!;
  const money = estimate.unit
    ? formatUnits(st.worst.units, estimate.unit)
    : 'no charging rules in the cluster profile';
  return [
    `charging (${profile.name}${estimate.source ? `; ${estimate.source}` : ''}): ` +
      `${st.effectiveCoresPerTask} billed core(s)${st.gpusPerTask ? ` + ${st.gpusPerTask} GPU(s)` : ''} on ${st.partition}; ` +
      `worst (held to the time limit ${resources.time}) ${formatHours(st.worst.gpuHours)} GPU-h, ${formatHours(st.worst.coreHours)} core-h, ${money}; ` +
      'less when the shell ends sooner',
    profile.account
      ? `account: ${profile.account}`
      : `account: none named (cluster profile ${profile.name} names none: SLURM charges your default account)`,
  ];
}
