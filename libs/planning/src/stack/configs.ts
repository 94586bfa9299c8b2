// Where a stack's configuration is: the workspace's `stacks/<stack>.yaml` (or a Pulumi project's own
// `Pulumi.<stack>.yaml`), and which backend holds its state.
import { join } from 'node:path';
import { WORKSPACE_VARIABLE, inWorkspace, readWorkspace, stackFileOf, type Workspace } from '@kdgat/config';

/** Where stack configurations are read from: a workspace, and the tool's checkout (its Pulumi project). */
export interface StackConfigs {
  workspace: Workspace;
  /** The tool's own checkout (infra/Pulumi.yaml names the project whose config keys a stack file holds). */
  repoRoot: string;
  /**
   * A Pulumi project directory holding `Pulumi.<stack>.yaml` itself instead of the workspace's
   * stack files ($HPC_INFRA_DIR: infra's and the site suite's temporary projects).
   */
  projectDir?: string;
}

/** The stack's configuration file: `<workspace>/<stacks>/<stack>.yaml` (or the project's own). */
export function declaredStackFile(configs: StackConfigs, stack: string): string {
  return configs.projectDir !== undefined
    ? join(configs.projectDir, `Pulumi.${stack}.yaml`)
    : stackFileOf(configs.workspace, stack);
}

/** The stack file as the user reads it: relative to the workspace when it is in it. */
export function stackFileLabel(configs: StackConfigs, stack: string): string {
  return inWorkspace(configs.workspace, declaredStackFile(configs, stack));
}

/**
 * The environment a `pulumi` command of the workspace runs with: the workspace's own file backend,
 * unless the user named another (PULUMI_BACKEND_URL).
 */
export function workspaceBackendEnv(
  configs: StackConfigs,
  env: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const withRoot = { ...env, [WORKSPACE_VARIABLE]: configs.workspace.root };
  if (env['PULUMI_BACKEND_URL'] || configs.projectDir !== undefined) return withRoot;
  return { ...withRoot, PULUMI_BACKEND_URL: `file://${configs.workspace.stateDir}` };
}

/** The tool's own checkout as a workspace: its stacks/ and examples (tests and benches use it). */
export function checkoutStackConfigs(repoRoot: string): StackConfigs {
  return { workspace: readWorkspace(repoRoot, 'default'), repoRoot };
}
