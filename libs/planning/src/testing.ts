// Fixtures for unit tests of @kdgat/planning and the projects that use it (`@kdgat/planning/testing`).
// A provisioned stack's outputs.
import { environmentSpecHash, type ResolvedExperiment } from '@kdgat/config';
import type { StackOutputs } from './stack/outputs.ts';

export const sampleOutputs: StackOutputs = {
  profile: 'local',
  connection: { kind: 'local' },
  environments: [
    {
      name: 'cpu-local',
      backend: 'venv',
      prefix: '/opt/venv',
      activate: 'source /opt/venv/bin/activate',
      specHash: 'a'.repeat(64),
      lockPath: '/opt/lock.txt',
      lockHash: 'b'.repeat(64),
    },
  ],
  scratch: { root: '/s', cacheDirs: { synth: '/s/cache/synth' }, runsDir: '/s/runs', logsDir: '/s/logs' },
  scripts: {
    dir: '/s/scripts',
    stageData: '/s/scripts/stage-data.sh',
    epilog: '/s/scripts/epilog.sh',
    trainGpu: '/s/scripts/train-gpu.sh',
    preprocessGpu: '/s/scripts/preprocess-gpu.sh',
  },
};

/** A DDP stage on Pitzer (`cpus` is per task, one task per GPU: 2 x 6 cpus), on `partition`. */
export function ddpCostSpec(partition = 'gpu-quad'): string {
  return `name: ddp-cost
cluster: osc-pitzer
environment: gnn-rapids
account: PAS1266
stages:
  - id: teacher
    stage: curriculum
    model: gat
    scale: large
    dataset: hcrl_sa
    resources:
      cpus: 6
      memGB: 200
      gpus: { count: 2, type: v100 }
      time: "8:00:00"
      partition: ${partition}
`;
}

/** `base` with one environment per environment the experiment's stages use, as a stack would have them. */
export function outputsFor(
  resolved: Pick<ResolvedExperiment, 'environments'>,
  base: StackOutputs = sampleOutputs,
): StackOutputs {
  const template = base.environments[0]!;
  return {
    ...base,
    environments: Object.values(resolved.environments).map((spec) => ({
      ...template,
      name: spec.name,
      backend: spec.backend,
      prefix: `/opt/envs/${spec.name}`,
      specHash: environmentSpecHash(spec),
    })),
  };
}
