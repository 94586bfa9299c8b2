// An environment that names the site modules its interpreter needs (spec `modules`, e.g. OSC's
// `python/3.12` for a researcher's uv venv): ClusterSite builds it after them and exports them, as
// the runner predicts from the stack file; an environment without them is as before.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as pulumi from '@pulumi/pulumi';
import {
  EnvironmentSpecSchema,
  StackEnvironmentOutputsSchema,
  rawSiteConfigFromStackFile,
  siteFromStackConfig,
  type SiteDeclaration,
} from '@kdgat/config';
import { declaredSiteOutputs } from '@kdgat/slurm-templates';
import { beforeAll, describe, expect, it } from 'vitest';

interface Created {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
}
const created: Created[] = [];

beforeAll(() => {
  pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        created.push({ type: args.type, name: args.name, inputs: args.inputs });
        return {
          id: `${args.name}-id`,
          state: { ...args.inputs, lockHash: 'f'.repeat(64), lock: 'pip==25\n' },
        };
      },
      call: (args) => args.inputs,
    },
    'kdgat-hpc',
    'osc-pitzer',
    true,
  );
});

const value = <T>(o: pulumi.Output<T>): Promise<T> => new Promise((resolve) => o.apply(resolve));

/** The repository's osc-pitzer stack with a researcher's uv venv beside its default environment. */
function declaration(): SiteDeclaration {
  const text = readFileSync(new URL('../../stacks/osc-pitzer.yaml', import.meta.url), 'utf8');
  const site = siteFromStackConfig(
    rawSiteConfigFromStackFile(text, 'kdgat-hpc'),
    fileURLToPath(new URL('../..', import.meta.url)),
  );
  const venv = EnvironmentSpecSchema.parse({
    name: 'tiny-venv',
    backend: 'venv',
    python: '3.12',
    modules: ['python/3.12'],
    requirements: ['lightning==2.5.0'],
  });
  return {
    ...site,
    environments: [
      site.environments[0]!,
      { spec: venv, build: { ...site.environments[0]!.build, frontend: 'pip', frontendCommand: 'python3' } },
    ],
  };
}

describe("an environment's own site modules (ClusterSite)", () => {
  it('are loaded for its build after the profile modules, are part of its spec, and are exported as declared', async () => {
    const { ClusterSite } = await import('../components/cluster-site.ts');
    const site = declaration();
    const cluster = new ClusterSite('mods', {
      ...site,
      connection: { kind: 'local' },
      owner: 'kdgat-hpc/osc-pitzer',
    });
    const environments = await value(cluster.outputs.environments);
    await new Promise((r) => setTimeout(r, 100));
    const built = created.filter((c) => c.type === 'pulumi-nodejs:dynamic/kdgat:Environment');
    const venv = built.find((c) => c.name === 'mods-env-tiny-venv')!;
    expect(venv.inputs).toMatchObject({
      frontendCommand: 'python3',
      modules: { conda: 'miniconda3/24.1.2-py310', cuda: 'cuda/12.4.1' },
      environmentModules: ['python/3.12'],
    });
    // In the spec text (a change of them is a change of the spec, so a rebuild): in load order.
    expect(venv.inputs.environmentYml).toContain('#   - python/3.12\n');
    // The default environment names none: its inputs have no such key.
    const rapids = built.find((c) => c.name === 'mods-env-gnn-rapids')!;
    expect(rapids.inputs).not.toHaveProperty('environmentModules');

    const outputs = environments.map((e) => ({ name: e.name, modules: e.modules }));
    expect(outputs).toEqual([
      { name: 'gnn-rapids', modules: undefined },
      { name: 'tiny-venv', modules: ['python/3.12'] },
    ]);
    expect(environments[0]).not.toHaveProperty('modules');
    // The activation every kernel and user sources loads it before the venv's bin/activate.
    expect(environments[1]!.activate).toContain('hpc_env_modules=(\n  python/3.12\n)\n');
    // What the runner predicts from the declaration alone is what the program exports.
    expect(environments.map(({ lockHash: _h, lock: _l, ...e }) => e)).toEqual(
      declaredSiteOutputs(site).environments,
    );
    for (const e of environments) expect(StackEnvironmentOutputsSchema.parse(e)).toEqual(e);
  });
});
