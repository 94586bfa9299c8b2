// The outputs a site's stack has once provisioned (docs/CONTRACTS.md "Stack outputs"), as far as
// they follow from its declaration alone: everything but the environment's lock, which only the
// build produces. ClusterSite (infra) provisions exactly these paths; the runner uses the same
// function to plan against a site that is not provisioned yet.
import {
  environmentSpecHash,
  publicConnection,
  scratchLayoutFor,
  sitePathsFor,
  type SiteDeclaration,
  type StackOutputs,
} from '@kdgat/config';
import { activationSnippet } from '../script-sections/script-sections.ts';
import { SITE_SCRIPT_NAMES } from './render-site-scripts.ts';

/** The stack outputs (`StackOutputs` of @kdgat/config) but what only the build produces: the lock. */
export type DeclaredSiteOutputs = Omit<StackOutputs, 'environment'> & {
  environment: Omit<StackOutputs['environment'], 'lockHash' | 'lock'>;
};

export function declaredSiteOutputs(
  site: Pick<SiteDeclaration, 'profile' | 'environment' | 'datasets' | 'build'>,
): DeclaredSiteOutputs {
  const { profile, environment } = site;
  const paths = sitePathsFor(profile, environment.name, site.build);
  const layout = scratchLayoutFor(profile, site.datasets);
  const scripts = Object.fromEntries(
    Object.entries(SITE_SCRIPT_NAMES).map(([key, file]) => [key, `${paths.scriptsDir}/${file}`]),
  ) as Record<keyof typeof SITE_SCRIPT_NAMES, string>;
  return {
    profile: profile.name,
    connection: publicConnection(profile.connection),
    environment: {
      name: environment.name,
      backend: environment.backend,
      prefix: paths.prefix,
      activate: activationSnippet({ ...environment, prefix: paths.prefix }, profile),
      specHash: environmentSpecHash(environment),
      lockPath: paths.lockPath,
    },
    scratch: {
      root: layout.root,
      cacheDirs: layout.cacheDirs,
      runsDir: layout.runsDir,
      logsDir: layout.logsDir,
    },
    scripts: { dir: paths.scriptsDir, ...scripts },
  };
}
