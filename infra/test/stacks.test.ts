// The whole program (index.ts) for the osc-pitzer stack under pulumi.runtime.setMocks: the stack
// file as committed, plus a secret key; asserts the declared graph and the outputs for the runner.
import { readFileSync } from 'node:fs';
import * as pulumi from '@pulumi/pulumi';
import { fileURLToPath } from 'node:url';
import {
  StackOutputsSchema,
  StackOutputsObjectSchema,
  projectDependencies,
  rawSiteConfigFromStackFile,
  siteFromStackConfig,
} from '@kdgat/config';
import { JOB_LIBRARY, declaredSiteOutputs } from '@kdgat/slurm-templates';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';

interface Created {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
}
const created: Created[] = [];
const PRIVATE_KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nunit-test-key\n-----END OPENSSH PRIVATE KEY-----\n';

beforeAll(() => {
  const stack = parse(readFileSync(new URL('../../stacks/osc-pitzer.yaml', import.meta.url), 'utf8')) as {
    config: Record<string, unknown>;
  };
  const config = Object.fromEntries(
    Object.entries(stack.config).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]),
  );
  config['kdgat-hpc:sshPrivateKey'] = PRIVATE_KEY;
  pulumi.runtime.setAllConfig(config, ['kdgat-hpc:sshPrivateKey']);
  pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        created.push({ type: args.type, name: args.name, inputs: args.inputs });
        return {
          id: `${args.name}-id`,
          state: { ...args.inputs, lockHash: 'f'.repeat(64), lock: '@EXPLICIT\n' },
        };
      },
      call: (args) => args.inputs,
    },
    'kdgat-hpc',
    'osc-pitzer',
    true,
  );
});

const value = <T>(o: pulumi.Output<T> | T): Promise<T> =>
  new Promise((resolve) =>
    pulumi.Output.isInstance(o) ? (o as pulumi.Output<T>).apply(resolve) : resolve(o as T),
  );

describe('osc-pitzer stack (mocks)', () => {
  it('declares the gnn-rapids conda environment, the PAS1266 scratch layout and the scripts over ssh', async () => {
    const program = await import('../index.ts');
    const environments = (await value(program.environments)) as unknown as Record<string, string>[];
    expect(environments.map((e) => e['name'])).toEqual(['gnn-rapids', 'gnn-rapids-cugraphops', 'gnn-cpu']);
    const environment = environments[0]!;
    const scratch = (await value(program.scratch)) as { root: string; cacheDirs: Record<string, string> };
    const scripts = (await value(program.scripts)) as unknown as Record<string, unknown>;
    expect(await value(program.profile)).toBe('osc-pitzer');
    expect(environment).toMatchObject({ name: 'gnn-rapids', backend: 'conda' });
    expect(environment.specHash).toMatch(/^[0-9a-f]{64}$/);
    expect(scratch.root).toBe('/fs/scratch/PAS1266/kd-gat');
    expect(Object.keys(scratch.cacheDirs).sort()).toEqual(['hcrl_ch', 'hcrl_sa', 'set_01']);
    expect(Object.keys(scripts).sort()).toEqual([
      'dir',
      'epilog',
      'jobLibrary',
      'preprocessGpu',
      'stageData',
      'trainGpu',
    ]);

    await new Promise((r) => setTimeout(r, 100));
    const envs = created.filter((c) => c.type === 'pulumi-nodejs:dynamic/kdgat:Environment');
    // one resource per environment, each named after it
    expect(envs.map((c) => c.name).sort()).toEqual([
      'site-env-gnn-cpu',
      'site-env-gnn-rapids',
      'site-env-gnn-rapids-cugraphops',
    ]);
    const env = envs.find((c) => c.name === 'site-env-gnn-rapids')!;
    // `conda` comes from the profile's conda module, loaded (with CUDA's) before every frontend command
    expect(env.inputs).toMatchObject({
      frontend: 'conda',
      frontendCommand: 'conda',
      owner: 'kdgat-hpc/osc-pitzer',
      profile: 'osc-pitzer',
      modules: { conda: 'miniconda3/24.1.2-py310', cuda: 'cuda/12.4.1', init: '/etc/profile.d/lmod.sh' },
      // the login node has no GPU: conda solves gnn-rapids for the CUDA its spec targets
      solveEnvironment: { CONDA_OVERRIDE_CUDA: '12.8' },
    });
    // conda gives Python, the CUDA pin and pip; pip installs the pipeline's pins (python/uv.lock) with
    // the GPU layer cuda12 (python/gpu/cuda12.lock), one line each
    const yml = env.inputs.environmentYml as string;
    expect(yml).toContain('dependencies:\n  - cuda-version=12.8\n  - pip\n  - python=3.12\n  - pip:\n');
    const pipLines = yml.split('\n').filter((l) => l.startsWith('      - '));
    const kdgat = projectDependencies(
      readFileSync(new URL('../../python/pyproject.toml', import.meta.url), 'utf8'),
    );
    for (const d of kdgat) expect(pipLines).toContain(`      - ${d.name}==${d.version}`);
    expect(pipLines).toContain('      - nvidia-nvjitlink-cu12==12.8.93');
    // the connection, with the key, reaches the resource as a Pulumi secret
    expect(env.inputs.connection).toEqual({
      [pulumi.runtime.specialSigKey]: pulumi.runtime.specialSecretSig,
      value: expect.objectContaining({
        kind: 'ssh',
        host: 'pitzer.osc.edu',
        port: 22,
        privateKey: PRIVATE_KEY,
      }),
    });
    const trainGpu = created.find((c) => c.name === 'site-scripts-train_gpu.sh')!;
    expect(trainGpu.inputs.content).toContain('PAS1266');
    // the hand-use script loads the site's job library, whose error names this stack's `up`
    expect(trainGpu.inputs.content).toContain('npx nx run infra:up --stack osc-pitzer');
    const library = created.find((c) => c.name === 'site-scripts-job-library')!;
    expect(library.inputs).toMatchObject({
      path: `/fs/ess/PAS1266/kd-gat/scripts/lib/${JOB_LIBRARY.file}`,
      content: JOB_LIBRARY.text,
    });
    const dirs = created.filter((c) => c.type === 'pulumi-nodejs:dynamic/kdgat:TargetDirectory');
    const kernels = '/users/PAS1266/REPLACE_WITH_OSC_USER/.local/share/jupyter/kernels';
    const scratchDirs = dirs.filter((d) => !String(d.inputs.path).startsWith(kernels));
    expect(scratchDirs.every((d) => d.inputs.group === 'PAS1266')).toBe(true);
    // the kernels the stack declares (gnn-rapids, gnn-cpu), where OnDemand's Jupyter app finds them
    const kernelFiles = created
      .filter((c) => c.type === 'pulumi-nodejs:dynamic/kdgat:TargetFile')
      .map((c) => String(c.inputs.path))
      .filter((p) => p.startsWith(kernels))
      .sort();
    expect(kernelFiles).toEqual([
      `${kernels}/gnn-cpu/kernel.json`,
      `${kernels}/gnn-cpu/kernel.sh`,
      `${kernels}/gnn-rapids/kernel.json`,
      `${kernels}/gnn-rapids/kernel.sh`,
    ]);
  });

  it('exports outputs that parse against the one contract (StackOutputsSchema of @kdgat/config)', async () => {
    // What `pulumi stack output --json` prints is what the runner parses: every field the program
    // exports is declared there, and nothing more (the schema is strict).
    const program = await import('../index.ts');
    const outputs = await value(
      pulumi.output({
        profile: program.profile,
        connection: program.connection,
        environments: program.environments,
        scratch: program.scratch,
        scripts: program.scripts,
      }),
    );
    expect(Object.keys(program).sort()).toEqual(Object.keys(StackOutputsObjectSchema.shape).sort());
    const parsed = StackOutputsSchema.parse(outputs);
    expect(parsed).toEqual(outputs);
    for (const e of parsed.environments) expect(e.lock).toBe('@EXPLICIT\n');
    expect(parsed.connection).toMatchObject({ kind: 'ssh', host: 'pitzer.osc.edu' });
    expect(parsed.connection).not.toHaveProperty('privateKey');
  });

  it('exports exactly what the runner predicts from the stack file before it is provisioned', async () => {
    // `runner plan` on a stack that is not provisioned uses declaredSiteOutputs of the same
    // declaration; if the program and the prediction drift apart, this fails.
    const program = await import('../index.ts');
    const text = readFileSync(new URL('../../stacks/osc-pitzer.yaml', import.meta.url), 'utf8');
    const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
    const predicted = declaredSiteOutputs(
      siteFromStackConfig(rawSiteConfigFromStackFile(text, 'kdgat-hpc'), repoRoot),
    );
    const environments = await value(pulumi.output(program.environments));
    expect(await value(program.profile)).toBe(predicted.profile);
    expect(await value(program.scratch)).toEqual(predicted.scratch);
    expect(await value(program.scripts)).toEqual(predicted.scripts);
    expect(environments).toEqual(
      predicted.environments.map((e) => ({ ...e, lockHash: 'f'.repeat(64), lock: '@EXPLICIT\n' })),
    );
  });
});
