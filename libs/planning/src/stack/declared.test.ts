import { resolve } from 'node:path';
import { StackOutputsSchema } from '@kdgat/config';
import { describe, expect, it } from 'vitest';
import { DeclaredStackOutputs, isDeclaredOnly, readStackOrDeclared } from './declared.ts';
import { checkoutStackConfigs } from './configs.ts';
import { StackNotProvisionedError, type StackOutputsSource } from './outputs.ts';
import { sampleOutputs } from '../testing.ts';

const REPO = resolve(import.meta.dirname, '../../../..');
const notProvisioned: StackOutputsSource = {
  description: 'pulumi stack output',
  read: (stack) => Promise.reject(new StackNotProvisionedError(stack, `stack ${stack} has no outputs`)),
};

describe("DeclaredStackOutputs (a stack predicted from the workspace's stacks/<stack>.yaml)", () => {
  it('osc-pitzer: the scratch layout, environments and scripts ClusterSite would export', async () => {
    const o = await new DeclaredStackOutputs(checkoutStackConfigs(REPO)).read('osc-pitzer');
    expect(o.scratch).toEqual({
      root: '/fs/scratch/PAS1266/kd-gat',
      cacheDirs: {
        hcrl_ch: '/fs/scratch/PAS1266/kd-gat/cache/hcrl_ch',
        hcrl_sa: '/fs/scratch/PAS1266/kd-gat/cache/hcrl_sa',
        set_01: '/fs/scratch/PAS1266/kd-gat/cache/set_01',
      },
      runsDir: '/fs/scratch/PAS1266/kd-gat/runs',
      logsDir: expect.stringMatching(/^\//),
    });
    expect(o.environments.map((e) => e.name)).toEqual(['gnn-rapids', 'gnn-rapids-cugraphops', 'gnn-cpu']);
    for (const e of o.environments) {
      expect(e).toMatchObject({ backend: 'conda', lockHash: '' });
      expect(e.specHash).toMatch(/^[0-9a-f]{64}$/);
      expect(e.activate).toContain('conda activate');
      expect(e.prefix).toBe(`/fs/ess/PAS1266/kd-gat/envs/${e.name}`);
    }
    expect(o.scripts.stageData).toBe(`${o.scripts.dir}/stage_data.sh`);
    expect(o.declared.file).toBe('stacks/osc-pitzer.yaml');
    expect(o.declared.unknown.join(' ')).toContain('lock');
  });

  it.each(['osc-pitzer', 'local'])(
    '%s: the predicted outputs parse against the one contract (StackOutputsSchema of @kdgat/config)',
    async (stack) => {
      const { declared: _how, ...outputs } = await new DeclaredStackOutputs(checkoutStackConfigs(REPO)).read(
        stack,
      );
      expect(StackOutputsSchema.parse(outputs)).toEqual(outputs);
    },
  );

  it('a stack with no declared configuration is still "not provisioned"', async () => {
    await expect(new DeclaredStackOutputs(checkoutStackConfigs(REPO)).read('nowhere')).rejects.toThrow(
      StackNotProvisionedError,
    );
  });
});

describe('readStackOrDeclared', () => {
  const declared = new DeclaredStackOutputs(checkoutStackConfigs(REPO));

  it('plans from the declaration when the stack has no outputs, and says what is predicted', async () => {
    const lines: string[] = [];
    const r = await readStackOrDeclared(notProvisioned, 'osc-pitzer', {
      dryRun: true,
      declared,
      log: (l) => lines.push(l),
    });
    expect(isDeclaredOnly(r.outputs)).toBe(true);
    expect(r.source).toBe(declared);
    expect(lines.join('\n')).toMatch(
      /stack osc-pitzer is not provisioned[\s\S]*predicted, not read from the stack[\s\S]*unknown until provisioned/,
    );
  });

  it('train (not a dry run) still needs the provisioned stack', async () => {
    await expect(
      readStackOrDeclared(notProvisioned, 'osc-pitzer', { dryRun: false, declared, log: () => {} }),
    ).rejects.toThrow(/run `pulumi up` on stack osc-pitzer first/);
  });

  it('a provisioned stack is read as it is', async () => {
    const source: StackOutputsSource = { description: 'file', read: () => Promise.resolve(sampleOutputs) };
    const r = await readStackOrDeclared(source, 'local', { dryRun: true, declared, log: () => {} });
    expect(r.outputs).toBe(sampleOutputs);
    expect(isDeclaredOnly(r.outputs)).toBe(false);
  });
});
