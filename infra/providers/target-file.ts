import * as pulumi from '@pulumi/pulumi';
import { lazyProvider } from './dynamic.ts';
import type { Connection } from '@kdgat/transport';

const provider = lazyProvider(new URL('./target-file.impl.ts', import.meta.url).href);

export interface TargetFileArgs {
  connection: pulumi.Input<Connection>;
  path: pulumi.Input<string>;
  /** Multi-line text: the CLI shows a change of it line by line. */
  content: pulumi.Input<string>;
  mode: pulumi.Input<string>;
}

/** A text file on the cluster (or this machine), e.g. one installed SLURM script. */
export class TargetFile extends pulumi.dynamic.Resource {
  declare readonly path: pulumi.Output<string>;
  declare readonly content: pulumi.Output<string>;
  declare readonly mode: pulumi.Output<string>;
  declare readonly sha256: pulumi.Output<string>;

  constructor(name: string, args: TargetFileArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      provider,
      name,
      { ...args, sha256: undefined },
      { ...opts, additionalSecretOutputs: ['connection'] },
      'kdgat',
      'TargetFile',
    );
  }
}
