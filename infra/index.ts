// kdgat-hpc infrastructure: one ClusterSite per stack (see README.md and docs/CONTRACTS.md).
import { fileURLToPath } from 'node:url';
import * as pulumi from '@pulumi/pulumi';
import { WORKSPACE_VARIABLE } from '@kdgat/config';
import { ClusterSite } from './components/cluster-site.ts';
import { readSiteConfig } from './components/site-config.ts';

// Relative paths in the stack's configuration resolve against its workspace (infra/bin/pulumi-stack.sh
// exports it), else against this checkout, whose own stacks are a workspace at its root.
const workspaceRoot = process.env[WORKSPACE_VARIABLE] || fileURLToPath(new URL('..', import.meta.url));
const site = new ClusterSite('site', readSiteConfig(new pulumi.Config(), workspaceRoot));

export const profile = site.outputs.profile;
export const connection = site.outputs.connection;
export const environments = site.outputs.environments;
export const scratch = site.outputs.scratch;
export const scripts = site.outputs.scripts;
// The site's other clusters (stack config `clusters`); an empty list on a one-cluster site (an
// undefined export makes `pulumi up` warn that it will not show; the runner reads both as none).
export const clusters = site.outputs.clusters ?? [];
// What every job on the site exports, and where each data set's raw recordings are.
export const jobEnvironment = site.outputs.jobEnvironment;
