// JupyterKernel under pulumi.runtime.setMocks: the resources one environment's kernel declares.
import * as pulumi from '@pulumi/pulumi';
import { clusterPresets, currentCodeFor, kernelDefaultCodeFor } from '@kdgat/config';
import { activationSnippet } from '@kdgat/slurm-templates';
import { beforeAll, describe, expect, it } from 'vitest';

interface Created {
  type: string;
  name: string;
  parent?: string;
  inputs: Record<string, unknown>;
}
const created: Created[] = [];

beforeAll(() => {
  pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        created.push({ type: args.type, name: args.name, inputs: args.inputs });
        return { id: `${args.name}-id`, state: { ...args.inputs, appliedMode: args.inputs.mode } };
      },
      call: (args) => args.inputs,
    },
    'kdgat-hpc',
    'unit',
    true,
  );
});

const settle = () => new Promise((r) => setTimeout(r, 50));
const pitzer = clusterPresets['osc-pitzer']!;
const ssh = {
  kind: 'ssh' as const,
  host: 'pitzer.osc.edu',
  port: 22,
  user: 'jdoe',
  hostKey: 'ssh-ed25519 AAAA',
};
const KERNELS = '/users/PAS1266/jdoe/.local/share/jupyter/kernels';
const env = {
  name: 'gnn-rapids',
  backend: 'conda' as const,
  prefix: '/fs/ess/PAS1266/kd-gat/envs/gnn-rapids',
};

describe('JupyterKernel', () => {
  it('declares the kernel directory (removed when empty) and kernel.json, kernel.sh (0755) in it, carrying the lock hash', async () => {
    const { JupyterKernel } = await import('../components/jupyter-kernel.ts');
    const codePath = kernelDefaultCodeFor({ connection: ssh, paths: pitzer.paths });
    expect(codePath).toBe(currentCodeFor(pitzer.paths.scratchRoot, 'jdoe'));
    expect(codePath).toBe('/fs/scratch/PAS1266/kd-gat/code/jdoe/current');
    const k = new JupyterKernel('site-kernel-gnn-rapids', {
      kernel: { displayName: 'KD-GAT (gnn-rapids)', modules: ['cuda/12.4.1'] },
      environment: {
        ...env,
        activate: activationSnippet(env, pitzer),
        // the environment's build output: known at deployment
        lockHash: pulumi.output('f00d'),
      },
      profile: pitzer,
      kernelsDir: KERNELS,
      ...(codePath !== undefined ? { codePath } : {}),
      connection: pulumi.secret({ ...ssh, privateKey: 'KEY' }),
    });
    expect(k.kernelName).toBe('gnn-rapids');
    expect(k.dir).toBe(`${KERNELS}/gnn-rapids`);
    await settle();

    const mine = created.filter((c) => c.name.startsWith('site-kernel-gnn-rapids-'));
    expect(mine.map((c) => [c.type, c.name, c.inputs.path, c.inputs.mode])).toEqual([
      [
        'pulumi-nodejs:dynamic/kdgat:TargetDirectory',
        'site-kernel-gnn-rapids-dir',
        `${KERNELS}/gnn-rapids`,
        '0755',
      ],
      [
        'pulumi-nodejs:dynamic/kdgat:TargetFile',
        'site-kernel-gnn-rapids-kernel.json',
        `${KERNELS}/gnn-rapids/kernel.json`,
        '0644',
      ],
      [
        'pulumi-nodejs:dynamic/kdgat:TargetFile',
        'site-kernel-gnn-rapids-kernel.sh',
        `${KERNELS}/gnn-rapids/kernel.sh`,
        '0755',
      ],
    ]);
    expect(mine[0]!.inputs.onDelete).toBe('remove-if-empty');
    const json = JSON.parse(mine[1]!.inputs.content as string);
    expect(json.argv).toEqual(['bash', `${KERNELS}/gnn-rapids/kernel.sh`, '{connection_file}']);
    expect(json.env).toEqual({ HPC_ENV_LOCK_HASH: 'f00d' });
    expect(json.metadata['kdgat-hpc']).toMatchObject({ environment: 'gnn-rapids', lockHash: 'f00d' });
    const script = mine[2]!.inputs.content as string;
    expect(script).toContain('\nexport HPC_ENV_LOCK_HASH=f00d\n');
    expect(script).toContain('\nhpc_kernel_code=/fs/scratch/PAS1266/kd-gat/code/jdoe/current\n');
    expect(script).toContain(activationSnippet(env, pitzer));
  });

  it("leaves the scratch directories' inputs as they were: only a removable directory carries onDelete", async () => {
    const { TargetDirectory } = await import('../providers/target-directory.ts');
    new TargetDirectory('retained', { connection: { kind: 'local' }, path: '/s/cache', mode: '2770' });
    await settle();
    const inputs = Object.keys(created.find((c) => c.name === 'retained')!.inputs);
    expect(inputs.filter((k) => !k.startsWith('__')).sort()).toEqual(['connection', 'mode', 'path']);
  });
});
