// Where a run's files go on this machine and on the site: the workspace's stack files, the local
// copies of a remote site's runs, and a local run dir's path on the site.
import { join, relative } from 'node:path';
import { ensureHpcDir, type Workspace } from '@kdgat/config';
import { checkoutStackConfigs, type StackConfigs } from '@kdgat/planning';
import type { RunOptions, Site } from './types.ts';

/** The run's workspace and stack files: the ones the command line found, else the checkout's own. */
export function configsOf(opts: Pick<RunOptions, 'repoRoot' | 'configs'>): StackConfigs {
  return opts.configs ?? checkoutStackConfigs(opts.repoRoot);
}

/** Where this machine keeps its copies of a remote site's runs. */
export function localRunsRoot(workspace: Workspace, stack: string): string {
  return join(ensureHpcDir(workspace), 'sites', stack, 'runs');
}

/** The site's path of a run whose local directory is `localRunDir`. */
export function siteRunDirOf(site: Site, localRunDir: string): string {
  return site.files
    ? `${site.outputs.scratch.runsDir.replace(/\/+$/, '')}/${relative(site.runsRoot, localRunDir)}`
    : localRunDir;
}
