// The whole program (index.ts) for the embedded local stack (the quickstart's `pulumi up`) under
// pulumi.runtime.setMocks: every export has a value. An export that is undefined makes `pulumi up`
// print "warning: Undefined value (<name>) will not show as a stack output" to every new user.
import { readFileSync } from 'node:fs';
import * as pulumi from '@pulumi/pulumi';
import { StackOutputsSchema } from '@kdgat/config';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';

beforeAll(() => {
  const stack = parse(readFileSync(new URL('../../stacks/local.yaml', import.meta.url), 'utf8')) as {
    config: Record<string, unknown>;
  };
  const config = Object.fromEntries(
    Object.entries(stack.config).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]),
  );
  pulumi.runtime.setAllConfig(config);
  pulumi.runtime.setMocks(
    {
      newResource: (args) => ({
        id: `${args.name}-id`,
        state: { ...args.inputs, lockHash: 'f'.repeat(64), lock: '@EXPLICIT\n' },
      }),
      call: (args) => args.inputs,
    },
    'kdgat-hpc',
    'local',
    true,
  );
});

const value = <T>(o: pulumi.Output<T> | T): Promise<T> =>
  new Promise((resolve) =>
    pulumi.Output.isInstance(o) ? (o as pulumi.Output<T>).apply(resolve) : resolve(o as T),
  );

describe('local stack (mocks)', () => {
  it('exports a defined value for every output, clusters an empty list, and they parse as the runner reads them', async () => {
    const program = (await import('../index.ts')) as Record<string, unknown>;
    const outputs: Record<string, unknown> = {};
    for (const [name, exported] of Object.entries(program))
      outputs[name] = await value(pulumi.output(exported));
    const undefinedOnes = Object.entries(outputs)
      .filter(([, v]) => v === undefined)
      .map(([k]) => k);
    expect(undefinedOnes, 'exports pulumi up would warn about (Undefined value … will not show)').toEqual([]);
    expect(outputs['clusters']).toEqual([]);
    const parsed = StackOutputsSchema.parse(outputs);
    expect(parsed.clusters ?? []).toEqual([]); // what the runner's placement reads: no other cluster
    expect(parsed.profile).toBe('local');
  });
});
