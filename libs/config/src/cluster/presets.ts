// Cluster presets with the figures of ../../../../shared/docs/DOMAIN.md (OSC's published node specs).
import { ClusterProfileSchema, type ClusterProfile, type ClusterProfileInput } from './schema.ts';

const oscCommon = {
  connection: { kind: 'local' as const }, // a site stack sets its ssh connection (infra/Pulumi.osc-*.yaml)
  scheduler: 'slurm' as const,
  accountRequired: true,
  gpuDirective: 'gres' as const,
  scratchPurgeDays: 60,
  postJobHint: 'gpu-seff -M {cluster} {jobid}',
};

// OSC users load conda with `module load miniconda3` (24.1.2-py310 is the version OSC job scripts
// name); CUDA 12.4.1 is the plan's. The Lmod init is only sourced where a shell has no `module` yet.
const oscModules = { cuda: 'cuda/12.4.1', conda: 'miniconda3/24.1.2-py310', init: '/etc/profile.d/lmod.sh' };

const oscPaths = (project: string, cluster: string) => ({
  projectRoot: `/fs/ess/${project}/kd-gat`,
  scratchRoot: `/fs/scratch/${project}/kd-gat`,
  homeCacheRoot: `/users/${project}/kd-gat/data/cache`,
  logsDir: `/fs/scratch/${project}/kd-gat/logs/${cluster}`,
});

const inputs: Record<string, ClusterProfileInput> = {
  'osc-pitzer': {
    ...oscCommon,
    name: 'osc-pitzer',
    clusterName: 'pitzer',
    defaultPartition: 'gpu',
    modules: oscModules,
    paths: oscPaths('PAS1266', 'pitzer'),
    partitions: [
      { name: 'gpu', gpuType: 'v100', gpusPerNode: 2, gpuMemGB: 16, coresPerNode: 40, memPerNodeGB: 363, memPerCoreGB: 9.074, maxWalltime: '7-00:00:00' },
      { name: 'gpu-exp', gpuType: 'v100', gpusPerNode: 2, gpuMemGB: 32, coresPerNode: 48, memPerNodeGB: 363, memPerCoreGB: 9.074, maxWalltime: '7-00:00:00' },
      { name: 'gpu-quad', gpuType: 'v100', gpusPerNode: 4, gpuMemGB: 32, coresPerNode: 48, memPerNodeGB: 744, memPerCoreGB: 9.074, maxWalltime: '7-00:00:00' },
      { name: 'gpudebug', gpuType: 'v100', gpusPerNode: 2, gpuMemGB: 16, coresPerNode: 40, memPerNodeGB: 363, memPerCoreGB: 9.074, maxWalltime: '01:00:00' },
      { name: 'gpubackfill', gpuType: 'v100', gpusPerNode: 2, gpuMemGB: 16, coresPerNode: 40, memPerNodeGB: 363, memPerCoreGB: 9.074, maxWalltime: '04:00:00' },
    ],
  },
  'osc-ascend': {
    ...oscCommon,
    name: 'osc-ascend',
    clusterName: 'ascend',
    defaultPartition: 'nextgen',
    modules: oscModules,
    paths: oscPaths('PAS1266', 'ascend'),
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
