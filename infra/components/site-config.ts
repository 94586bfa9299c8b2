// Stack config -> ClusterSite arguments. The reading and validation of the config is @kdgat/config's
// (`siteFromStackConfig`), shared with the runner, which predicts a stack's outputs from the same
// declaration before the site is provisioned; this file adds what only Pulumi has (the secret key).
import * as pulumi from '@pulumi/pulumi';
import { presetOrObject, siteFromStackConfig, type RawSiteConfig } from '@kdgat/config';
import type { Connection } from '@kdgat/transport';
import type { ClusterSiteArgs } from './cluster-site.ts';

export { deepMerge } from '@kdgat/config';

/** Validated site arguments from raw config values (pure; the secret key is added by the caller). */
export function siteArgsFrom(
  raw: RawSiteConfig,
  repoRoot: string,
): Omit<ClusterSiteArgs, 'connection' | 'owner'> & { connection: Connection } {
  const site = siteFromStackConfig(raw, repoRoot);
  return { ...site, connection: site.profile.connection as Connection };
}

/** Reads the stack's config; the SSH private key (config secret `sshPrivateKey`) stays a secret. */
export function readSiteConfig(config: pulumi.Config, repoRoot: string): ClusterSiteArgs {
  const args = siteArgsFrom(
    {
      cluster: presetOrObject(config.require('cluster')),
      clusterOverrides: config.getObject('clusterOverrides'),
      clusters: config.getObject('clusters'),
      environments: config.getObject('environments'),
      environment: presetOrObject(config.get('environment')),
      environmentOverrides: config.getObject('environmentOverrides'),
      datasets: config.getObject('datasets'),
      rawDataRoot: config.get('rawDataRoot'),
      env: config.getObject('env'),
      build: config.getObject('build'),
      scratchGroup: config.get('scratchGroup'),
    },
    repoRoot,
  );
  const key = config.getSecret('sshPrivateKey');
  const connection: pulumi.Input<Connection> =
    key && args.connection.kind === 'ssh'
      ? pulumi.all([key]).apply(([privateKey]) => ({
          ...(args.connection as Extract<Connection, { kind: 'ssh' }>),
          privateKey,
        }))
      : args.connection;
  return { ...args, connection, owner: `${pulumi.getProject()}/${pulumi.getStack()}` };
}
