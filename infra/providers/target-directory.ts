import * as pulumi from '@pulumi/pulumi';
import { lazyProvider } from './dynamic.ts';
import type { Connection } from '@kdgat/transport';

const provider = lazyProvider(new URL('./target-directory.impl.ts', import.meta.url).href);

export interface TargetDirectoryArgs {
  connection: pulumi.Input<Connection>;
  path: pulumi.Input<string>;
  mode: pulumi.Input<string>;
  group?: pulumi.Input<string>;
  readme?: pulumi.Input<string>;
}

/** A directory on the cluster that outlives the stack: created here, never deleted (retainOnDelete). */
export class TargetDirectory extends pulumi.dynamic.Resource {
  declare readonly path: pulumi.Output<string>;
  declare readonly appliedMode: pulumi.Output<string>;

  constructor(name: string, args: TargetDirectoryArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      provider,
      name,
      { ...args, appliedMode: undefined },
      { ...opts, retainOnDelete: true, additionalSecretOutputs: ['connection'] },
      'kdgat',
      'TargetDirectory',
    );
  }
}
