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
  /**
   * What deleting the resource does. `retain` (the default): the directory outlives the stack
   * (retainOnDelete; the CLI shows `[retain]`), as cached data must. `remove-if-empty`: removed
   * once the stack's files in it are gone (e.g. a notebook kernel's), kept if it holds anything else.
   */
  onDelete?: 'retain' | 'remove-if-empty';
}

/**
 * A directory on the cluster. By default it outlives the stack: created here, never deleted
 * (retainOnDelete); with `onDelete: 'remove-if-empty'`, deleted when nothing else is left in it.
 */
export class TargetDirectory extends pulumi.dynamic.Resource {
  declare readonly path: pulumi.Output<string>;
  declare readonly appliedMode: pulumi.Output<string>;

  constructor(name: string, args: TargetDirectoryArgs, opts?: pulumi.CustomResourceOptions) {
    const { onDelete, ...rest } = args;
    const removable = onDelete === 'remove-if-empty';
    super(
      provider,
      name,
      // only a removable directory carries the key, so the retained ones' inputs stay as they were
      { ...rest, ...(removable ? { onDelete } : {}), appliedMode: undefined },
      { ...opts, retainOnDelete: !removable, additionalSecretOutputs: ['connection'] },
      'kdgat',
      'TargetDirectory',
    );
  }
}
