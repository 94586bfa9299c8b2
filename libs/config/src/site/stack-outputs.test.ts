import { describe, expect, it } from 'vitest';
import { StackOutputsSchema } from './stack-outputs.ts';

const outputs = {
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
      lock: 'optuna==4.1.0\n',
    },
  ],
  scratch: { root: '/s', cacheDirs: { synth: '/s/cache/synth' }, runsDir: '/s/runs', logsDir: '/s/logs' },
  scripts: {
    dir: '/s/scripts',
    stageData: '/s/scripts/stage_data.sh',
    epilog: '/s/scripts/job_epilog.sh',
    trainGpu: '/s/scripts/train_gpu.sh',
    preprocessGpu: '/s/scripts/preprocess_gpu.sh',
  },
};

describe('StackOutputsSchema (what infra exports, what the runner reads)', () => {
  it('reads a provisioned stack as it is', () => {
    expect(StackOutputsSchema.parse(outputs)).toEqual(outputs);
  });

  it('reads a stack provisioned before the connection, lock and several-environments outputs existed', () => {
    const { connection: _c, environments, ...older } = outputs;
    const { lock: _l, ...environment } = environments[0]!;
    expect(StackOutputsSchema.parse({ ...older, environment })).toMatchObject({
      connection: { kind: 'local' },
      environments: [environment],
    });
  });

  it('refuses two environments of one name', () => {
    const twice = { ...outputs, environments: [outputs.environments[0], outputs.environments[0]] };
    expect(StackOutputsSchema.safeParse(twice).success).toBe(false);
  });

  it('refuses a field the contract does not declare, and a profile that is not a profile name', () => {
    expect(StackOutputsSchema.safeParse({ ...outputs, extra: 1 }).success).toBe(false);
    expect(
      StackOutputsSchema.safeParse({
        ...outputs,
        environments: [{ ...outputs.environments[0], specPath: '/x' }],
      }).success,
    ).toBe(false);
    expect(StackOutputsSchema.safeParse({ ...outputs, profile: { name: 'local' } }).success).toBe(false);
  });
});
