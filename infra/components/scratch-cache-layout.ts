import * as pulumi from '@pulumi/pulumi';
import type { ScratchLayout } from '@kdgat/config';
import type { Connection } from '@kdgat/transport';
import { TargetDirectory } from '../providers/target-directory.ts';

export interface ScratchCacheLayoutArgs {
  layout: ScratchLayout;
  connection: pulumi.Input<Connection>;
  /** Cluster name for the README, e.g. `pitzer`. */
  clusterName: string;
  /** Unix group that shares the directories (setgid keeps it on new files). */
  group?: string;
}

/** The README at the scratch root: what lives where, and the site's purge policy. */
export function scratchReadme(layout: ScratchLayout, clusterName: string): string {
  const datasets = Object.entries(layout.cacheDirs).sort(([a], [b]) => a.localeCompare(b));
  return [
    `# kdgat-hpc scratch on ${clusterName}`,
    '',
    'Managed by the kdgat-hpc Pulumi stack (infra/). Do not rename these directories by hand.',
    '',
    `- \`${layout.runsDir}\`: run directories, one per experiment stage (\`<dataset>/<model>_<scale>_<stage>/\`)`,
    `- \`${layout.logsDir}\`: SLURM job logs`,
    ...datasets.map(([name, dir]) => `- \`${dir}\`: preprocessed graph cache of dataset \`${name}\``),
    '',
    '## Purge policy',
    '',
    `Files not accessed for ${layout.purgeDays} days are purged by the site. Scratch is not backed up:`,
    'keep raw data and results you need in project storage.',
    '',
    'Removing a dataset from the stack, or `pulumi destroy`, never deletes cached data: the',
    'directories stay until you remove them yourself.',
    '',
  ].join('\n');
}

/** The scratch root with per-dataset cache dirs, runs and logs; all retained on delete. */
export class ScratchCacheLayout extends pulumi.ComponentResource {
  readonly root: string;
  readonly cacheDirs: Record<string, string>;
  readonly runsDir: string;
  readonly logsDir: string;

  constructor(name: string, args: ScratchCacheLayoutArgs, opts?: pulumi.ComponentResourceOptions) {
    super('kdgat:hpc:ScratchCacheLayout', name, {}, opts);
    const { layout, connection, group } = args;
    const dir = (id: string, path: string, readme?: string, parent?: pulumi.Resource) =>
      new TargetDirectory(
        `${name}-${id}`,
        { connection, path, mode: layout.mode, group, readme },
        { parent: parent ?? this },
      );
    const root = dir('root', layout.root, scratchReadme(layout, args.clusterName));
    dir('runs', layout.runsDir, undefined, root);
    dir('logs', layout.logsDir, undefined, root);
    // Each user makes their own code root and shells dir (mode 700) in these; the sticky bit keeps
    // others' out of reach.
    dir('code', layout.codeDir, undefined, root);
    dir('shells', layout.shellsDir, undefined, root);
    for (const [dataset, path] of Object.entries(layout.cacheDirs))
      dir(`cache-${dataset}`, path, undefined, root);

    this.root = layout.root;
    this.cacheDirs = layout.cacheDirs;
    this.runsDir = layout.runsDir;
    this.logsDir = layout.logsDir;
    this.registerOutputs({
      root: this.root,
      cacheDirs: this.cacheDirs,
      runsDir: this.runsDir,
      logsDir: this.logsDir,
    });
  }
}
