/** Example inputs shaped like @kdgat/config values (osc-pitzer and local), shared by the tests. */
import { loadPipeline } from '@kdgat/config';
import type { EnvironmentView, LayoutView, PipelineView, RequeuePolicy, StageView } from './inputs.ts';
import { siteJobLibrary, type SiteProfileView } from './site/render-site-scripts.ts';
import type { TrainJobInput } from './train-job/render-train-job.ts';

export const pitzer: SiteProfileView = {
  name: 'osc-pitzer',
  clusterName: 'pitzer',
  scheduler: 'slurm',
  account: 'PAS1266',
  accountRequired: true,
  gpuDirective: 'gres',
  modules: { cuda: 'cuda/12.4.1', conda: 'miniconda3/24.1.2-py310' },
  postJobHint: 'gpu-seff -M {cluster} {jobid}',
  defaultPartition: 'gpu',
  partitions: [
    {
      name: 'gpu',
      gpuType: 'v100',
      gpusPerNode: 2,
      coresPerNode: 40,
      memPerNodeGB: 363,
      maxWalltime: '7-00:00:00',
    },
    {
      name: 'gpu-quad',
      gpuType: 'v100',
      gpusPerNode: 4,
      coresPerNode: 48,
      memPerNodeGB: 744,
      maxWalltime: '7-00:00:00',
    },
  ],
};

export const localProfile: SiteProfileView = {
  name: 'local',
  clusterName: 'local',
  scheduler: 'local',
  accountRequired: false,
  gpuDirective: 'gres',
  modules: {},
  defaultPartition: 'local',
  partitions: [
    { name: 'local', gpusPerNode: 0, coresPerNode: 2, memPerNodeGB: 8, maxWalltime: '1-00:00:00' },
  ],
};

export const condaEnv: EnvironmentView = {
  name: 'gnn-rapids',
  backend: 'conda',
  prefix: '/fs/ess/PAS1266/envs/gnn-rapids',
};
export const venvEnv: EnvironmentView = {
  name: 'cpu-local',
  backend: 'venv',
  prefix: '/work/main/.hpc/envs/cpu-local',
};

const scratch = '/fs/scratch/PAS1266/kd-gat';
export const pitzerLayout: LayoutView = {
  root: scratch,
  cacheDirs: { hcrl_sa: `${scratch}/cache/hcrl_sa`, set_01: `${scratch}/cache/set_01` },
  runsDir: `${scratch}/runs`,
  logsDir: `${scratch}/logs`,
};
export const localLayout: LayoutView = {
  root: '/work/main/.hpc/scratch',
  cacheDirs: { hcrl_sa: '/work/main/.hpc/scratch/cache/hcrl_sa' },
  runsDir: '/work/main/.hpc/scratch/runs',
  logsDir: '/work/main/.hpc/scratch/logs',
};

export const requeue: RequeuePolicy = { enabled: true, signal: 'USR1', leadSeconds: 300, maxRestarts: 3 };

export function stage(partial: Partial<StageView> & Pick<StageView, 'id' | 'stage' | 'model'>): StageView {
  return {
    scale: 'large',
    dataset: 'hcrl_sa',
    overrides: {},
    resources: {
      cpus: 10,
      memGB: 85,
      gpus: { count: 1, type: 'v100' },
      nodes: 1,
      ntasksPerNode: 1,
      time: '4:00:00',
      partition: 'gpu',
      arrayConcurrency: 4,
    },
    ...partial,
  };
}

const scriptsDir = `${scratch}/scripts`;
export function pitzerJob(partial: Partial<TrainJobInput> = {}): TrainJobInput {
  return {
    experiment: 'hcrl_sa teacher',
    stage: stage({
      id: 'autoencoder',
      stage: 'autoencoder',
      model: 'vgae',
      overrides: { 'training.max_epochs': 300 },
    }),
    profile: pitzer,
    environment: condaEnv,
    layout: pitzerLayout,
    runRoot: `${scratch}/runs/hcrl_sa-teacher`,
    scripts: { stageData: `${scriptsDir}/stage_data.sh`, epilog: `${scriptsDir}/job_epilog.sh` },
    jobLibrary: siteJobLibrary(scriptsDir, 'osc-pitzer'),
    requeue,
    staging: { enabled: true, datasets: ['hcrl_sa'] },
    ...partial,
  };
}

/** The repository's example of a researcher's own pipeline, as its declaration file says it. */
export function tinyLightning(): PipelineView {
  const p = loadPipeline(
    new URL('../../../examples/pipelines/tiny-lightning.pipeline.yaml', import.meta.url).pathname,
  );
  return { name: p.name, command: p.command, overrideStyle: p.overrides };
}
