// Cluster presets with OSC's published node specs (osc.edu, "Pitzer", "Ascend" and "Cardinal"
// technical specifications: https://www.osc.edu/resources/technical_support/supercomputers).
import { ClusterProfileSchema, type ClusterProfile, type ClusterProfileInput } from './schema.ts';

const oscCommon = {
  connection: { kind: 'local' as const }, // a site stack sets its ssh connection (stacks/osc-*.yaml)
  scheduler: 'slurm' as const,
  accountRequired: true,
  gpuDirective: 'gres' as const,
  scratchPurgeDays: 60,
  postJobHint: 'gpu-seff -M {cluster} {jobid}',
  // `OSCusage -P <project>` prints a project's usage and balance. Its exact output is not public:
  // the pattern takes the first amount after the word "balance"; change it if your output differs.
  balance: {
    argv: ['OSCusage', '-P', '{account}'],
    pattern: '[Bb]alance[^0-9$-]*\\$?\\s*(-?[0-9][0-9,]*(?:\\.[0-9]+)?)',
    unit: 'USD',
  },
};

// OSC users load conda with `module load miniconda3` (24.1.2-py310 is the version OSC job scripts
// name); CUDA 12.4.1 is the original proposal's. The Lmod init is only sourced where a shell has no `module` yet.
const oscModules = { cuda: 'cuda/12.4.1', conda: 'miniconda3/24.1.2-py310', init: '/etc/profile.d/lmod.sh' };

// OSC's rules (osc.edu "Job and storage charging", 2026): core-hours of effective cores
// (max(cores, memory / memory per core)) plus GPU-hours on GPU nodes, whole nodes for multi-node
// jobs. The dollar rates are not on a public OSC page we could read; these are the ones OSC users
// quote (2026: $0.003 per core-hour, $0.09 per GPU-hour). Put your own contract's rates here.
const OSC_SOURCE =
  'rules: https://www.osc.edu/supercomputing/knowledge-base/job_and_storage_charging (2026); ' +
  'rates: $0.003/core-hour, $0.09/GPU-hour as quoted by OSC users in 2026, not an OSC price sheet: check yours';
const oscRates = { coreHour: 0.003, gpuHour: 0.09 };
const oscCharging = (partitions: string[]) => ({
  unit: 'USD',
  source: OSC_SOURCE,
  wholeNodesWhenMultiNode: true,
  partitions: Object.fromEntries(partitions.map((p) => [p, oscRates])),
});

const oscPaths = (project: string, cluster: string) => ({
  projectRoot: `/fs/ess/${project}/kd-gat`,
  scratchRoot: `/fs/scratch/${project}/kd-gat`,
  homeCacheRoot: `/users/${project}/kd-gat/data/cache`,
  logsDir: `/fs/scratch/${project}/kd-gat/logs/${cluster}`,
});

// Partitions are kept one a line (prettier-ignore), so the figures read as a table.
const inputs: Record<string, ClusterProfileInput> = {
  'osc-pitzer': {
    ...oscCommon,
    name: 'osc-pitzer',
    clusterName: 'pitzer',
    defaultPartition: 'gpu',
    // osc.edu, "Scheduling Policies and Limits": up to 128 running jobs per user on Pitzer.
    limits: { maxRunningJobsPerUser: 128 },
    modules: oscModules,
    paths: oscPaths('PAS1266', 'pitzer'),
    charging: oscCharging(['gpu', 'gpu-exp', 'gpu-quad', 'gpudebug', 'gpubackfill', 'cpu']),
    // prettier-ignore
    partitions: [
      // Memory billed as one core is per partition: usable memory / cores per node (osc.edu, Pitzer
      // "Batch Limit Rules"). Never copy one partition's figure to another.
      // gpu: 363 GB / 40 cores; gpudebug and gpubackfill are given these nodes (no published figures of their own).
      { name: 'gpu', gpuType: 'v100', gpusPerNode: 2, gpuMemGB: 16, coresPerNode: 40, memPerNodeGB: 363, memPerCoreGB: 9.074, maxWalltime: '7-00:00:00' },
      // gpu-exp: 363 GB / 48 cores
      { name: 'gpu-exp', gpuType: 'v100', gpusPerNode: 2, gpuMemGB: 32, coresPerNode: 48, memPerNodeGB: 363, memPerCoreGB: 7.5625, maxWalltime: '7-00:00:00' },
      // gpu-quad: 744 GB / 48 cores
      { name: 'gpu-quad', gpuType: 'v100', gpusPerNode: 4, gpuMemGB: 32, coresPerNode: 48, memPerNodeGB: 744, memPerCoreGB: 15.5, maxWalltime: '7-00:00:00' },
      { name: 'gpudebug', gpuType: 'v100', gpusPerNode: 2, gpuMemGB: 16, coresPerNode: 40, memPerNodeGB: 363, memPerCoreGB: 9.074, maxWalltime: '01:00:00' },
      { name: 'gpubackfill', gpuType: 'v100', gpusPerNode: 2, gpuMemGB: 16, coresPerNode: 40, memPerNodeGB: 363, memPerCoreGB: 9.074, maxWalltime: '04:00:00' },
      // cpu: the regular 40-core Skylake nodes, 177.96 GB usable, 4.449 GB per core (the same page's
      // table); serial jobs up to 168 h (osc.edu "Scheduling Policies and Limits"). For CPU stages
      // (preprocessing) in a CPU environment such as gnn-cpu.
      { name: 'cpu', gpusPerNode: 0, gpuMemGB: 0, coresPerNode: 40, memPerNodeGB: 177.96, memPerCoreGB: 4.449, maxWalltime: '7-00:00:00' },
    ],
  },
  'osc-ascend': {
    ...oscCommon,
    name: 'osc-ascend',
    clusterName: 'ascend',
    defaultPartition: 'nextgen',
    modules: oscModules,
    paths: oscPaths('PAS1266', 'ascend'),
    charging: oscCharging(['nextgen', 'quad', 'longgpu']),
    // prettier-ignore
    partitions: [
      { name: 'nextgen', gpuType: 'a100', gpusPerNode: 2, gpuMemGB: 40, coresPerNode: 128, memPerNodeGB: 503, maxWalltime: '7-00:00:00' },
      { name: 'quad', gpuType: 'a100', gpusPerNode: 4, gpuMemGB: 80, coresPerNode: 96, memPerNodeGB: 1005, maxWalltime: '7-00:00:00' },
      { name: 'longgpu', gpuType: 'a100', gpusPerNode: 2, gpuMemGB: 40, coresPerNode: 128, memPerNodeGB: 503, maxWalltime: '14-00:00:00' },
    ],
  },
  'osc-cardinal': {
    ...oscCommon,
    name: 'osc-cardinal',
    clusterName: 'cardinal',
    defaultPartition: 'gpu',
    modules: oscModules,
    paths: oscPaths('PAS1266', 'cardinal'),
    charging: oscCharging(['gpu']),
    // prettier-ignore
    partitions: [
      { name: 'gpu', gpuType: 'h100', gpusPerNode: 4, gpuMemGB: 94, coresPerNode: 104, memPerNodeGB: 936, maxWalltime: '7-00:00:00' },
    ],
  },
  // This machine: no account, paths under the git-ignored .hpc/ (anchored at the repository by infra).
  // The `gpu` partition matches scripts/slurm-local.sh (one fake V100) so the same specs run on the
  // local scheduler and on the local SLURM; its size is a ceiling, the scheduler checks the real one.
  local: {
    name: 'local',
    clusterName: 'local',
    connection: { kind: 'local' },
    scheduler: 'local',
    accountRequired: false,
    gpuDirective: 'gres',
    defaultPartition: 'gpu',
    modules: {},
    paths: {
      projectRoot: '.hpc/project',
      scratchRoot: '.hpc/scratch',
      homeCacheRoot: '.hpc/home-cache',
      logsDir: '.hpc/scratch/logs',
    },
    scratchPurgeDays: 60,
    // Not a real site: illustrative service units so budgets and estimates can be tried locally.
    charging: {
      unit: 'SU',
      source: 'local test cluster: illustrative, 1 SU per core-hour and 10 SU per GPU-hour',
      wholeNodesWhenMultiNode: true,
      partitions: { gpu: { coreHour: 1, gpuHour: 10 }, gpudebug: { coreHour: 1, gpuHour: 10 } },
    },
    // prettier-ignore
    partitions: [
      { name: 'gpu', gpuType: 'v100', gpusPerNode: 1, gpuMemGB: 16, coresPerNode: 64, memPerNodeGB: 256, maxWalltime: '7-00:00:00' },
      { name: 'gpudebug', gpuType: 'v100', gpusPerNode: 1, gpuMemGB: 16, coresPerNode: 64, memPerNodeGB: 256, maxWalltime: '01:00:00' },
    ],
  },
};

export type ClusterPresetName = 'osc-pitzer' | 'osc-ascend' | 'osc-cardinal' | 'local';

export const clusterPresets: Record<ClusterPresetName, ClusterProfile> = Object.fromEntries(
  Object.entries(inputs).map(([k, v]) => [k, ClusterProfileSchema.parse(v)]),
) as Record<ClusterPresetName, ClusterProfile>;
