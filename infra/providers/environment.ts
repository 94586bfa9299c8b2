import * as pulumi from '@pulumi/pulumi';
import { lazyProvider } from './dynamic.ts';
import type { EnvironmentInputs } from './environment.impl.ts';

const provider = lazyProvider(new URL('./environment.impl.ts', import.meta.url).href);

export type EnvironmentArgs = { [K in keyof EnvironmentInputs]: pulumi.Input<EnvironmentInputs[K]> };

/** One built Python environment on the target (see environment.impl.ts for the lifecycle). */
export class Environment extends pulumi.dynamic.Resource {
  declare readonly prefix: pulumi.Output<string>;
  declare readonly lockPath: pulumi.Output<string>;
  declare readonly lock: pulumi.Output<string>;
  declare readonly lockHash: pulumi.Output<string>;
  declare readonly specHash: pulumi.Output<string>;
  declare readonly installedPackages: pulumi.Output<string>;
  declare readonly builtPackages: pulumi.Output<string>;
  declare readonly adopted: pulumi.Output<boolean>;

  constructor(name: string, args: EnvironmentArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      provider,
      name,
      {
        ...args,
        lock: undefined,
        lockHash: undefined,
        installedPackages: undefined,
        builtPackages: undefined,
        adopted: undefined,
      },
      {
        ...opts,
        additionalSecretOutputs: ['connection'],
        customTimeouts: { create: '6h', update: '6h', delete: '1h' },
      },
      'kdgat',
      'Environment',
    );
  }
}
