import * as pulumi from '@pulumi/pulumi';
import { kernelNameOf, type ClusterProfile, type KernelDeclaration } from '@kdgat/config';
import { kernelDirFor, renderKernelFiles, type KernelFiles } from '@kdgat/slurm-templates';
import type { Connection } from '@kdgat/transport';
import { TargetDirectory } from '../providers/target-directory.ts';
import { TargetFile } from '../providers/target-file.ts';

export interface JupyterKernelArgs {
  /** The environment's `kernel:` as the stack declares it (`KernelDeclarationSchema` of @kdgat/config). */
  kernel: KernelDeclaration;
  /**
   * The environment the kernel runs in: its activation snippet (the stack output `activate`) and
   * its lock hash, known once the environment is built (the kernel's files change with it).
   */
  environment: { name: string; prefix: string; activate: string; lockHash: pulumi.Input<string> };
  profile: Pick<ClusterProfile, 'name' | 'modules'>;
  /** The site user's kernels directory, absolute (`kernelsDirFor` of @kdgat/config). */
  kernelsDir: string;
  /** What a kernel without its own `code` imports the default pipeline from (`kernelDefaultCodeFor`); absent: the environment's. */
  codePath?: string;
  connection: pulumi.Input<Connection>;
}

/** The files of a kernel directory, and their modes: Jupyter runs `bash kernel.sh`, and a user may run it too. */
const FILE_MODES: Record<keyof KernelFiles, string> = { 'kernel.json': '0644', 'kernel.sh': '0755' };

/**
 * An environment's notebook kernel, where the site user's Jupyter (OnDemand's Jupyter app) finds it:
 * `<kernelsDir>/<name>/` with kernel.json and kernel.sh (`renderKernelFiles` of @kdgat/slurm-templates).
 * A preview shows their lines like any script's; deleting the component deletes both files and then
 * the directory (kept if something else was put in it).
 */
export class JupyterKernel extends pulumi.ComponentResource {
  /** Jupyter's kernel name. */
  readonly kernelName: string;
  readonly dir: string;

  constructor(name: string, args: JupyterKernelArgs, opts?: pulumi.ComponentResourceOptions) {
    super('kdgat:hpc:JupyterKernel', name, {}, opts);
    const { connection, environment } = args;
    this.kernelName = kernelNameOf(args.kernel, environment.name);
    this.dir = kernelDirFor(args.kernelsDir, this.kernelName);
    const files = pulumi.output(environment.lockHash).apply(
      (lockHash) =>
        renderKernelFiles({
          kernel: args.kernel,
          environment: { ...environment, lockHash },
          profile: args.profile,
          kernelsDir: args.kernelsDir,
          ...(args.codePath !== undefined ? { codePath: args.codePath } : {}),
        }).files,
    );
    const dir = new TargetDirectory(
      `${name}-dir`,
      { connection, path: this.dir, mode: '0755', onDelete: 'remove-if-empty' },
      { parent: this },
    );
    for (const [file, mode] of Object.entries(FILE_MODES) as [keyof KernelFiles, string][]) {
      new TargetFile(
        `${name}-${file}`,
        { connection, path: `${this.dir}/${file}`, content: files.apply((f) => f[file]), mode },
        // children of the directory: created after it, deleted before it
        { parent: dir },
      );
    }
    this.registerOutputs({ kernelName: this.kernelName, dir: this.dir });
  }
}
