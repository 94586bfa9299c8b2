// The outputs a site's stack has once provisioned (docs/CONTRACTS.md "Stack outputs"), as far as
// they follow from its declaration alone: everything but the environment's lock, which only the
// build produces. ClusterSite (infra) provisions exactly these paths; the runner uses the same
// function to plan against a site that is not provisioned yet.
import {
  environmentSpecHash,
  publicConnection,
  scratchLayoutFor,
  sitePathsFor,
  siteScriptsDir,
  type SiteDeclaration,
  type StackOutputs,
} from '@kdgat/config';
import { activationSnippet } from '../script-sections/script-sections.ts';
import { SITE_SCRIPT_NAMES } from './render-site-scripts.ts';
import { JOB_LIBRARY, jobLibraryPath } from '../job-library/job-library.ts';

/** The stack outputs (`StackOutputs` of @kdgat/config) but what only the build produces: the locks. */
export type DeclaredSiteOutputs = Omit<StackOutputs, 'environments'> & {
  environments: Omit<StackOutputs['environments'][number], 'lockHash' | 'lock'>[];
};

export function declaredSiteOutputs(
  site: Pick<SiteDeclaration, 'profile' | 'environments' | 'datasets'> &
    Partial<Pick<SiteDeclaration, 'clusters' | 'env' | 'rawData'>>,
): DeclaredSiteOutputs {
  const { profile } = site;
  const layout = scratchLayoutFor(profile, site.datasets);
  const scriptsDir = siteScriptsDir(profile);
  const scripts = Object.fromEntries(
    Object.entries(SITE_SCRIPT_NAMES).map(([key, file]) => [key, `${scriptsDir}/${file}`]),
  ) as Record<keyof typeof SITE_SCRIPT_NAMES, string>;
  return {
    profile: profile.name,
    connection: publicConnection(profile.connection),
    environments: site.environments.map(({ spec, build }) => {
      const paths = sitePathsFor(profile, spec.name, build);
      return {
        name: spec.name,
        backend: spec.backend,
        prefix: paths.prefix,
        ...environmentModulesOutput(spec),
        activate: activationSnippet({ ...spec, prefix: paths.prefix }, profile),
        specHash: environmentSpecHash(spec),
        lockPath: paths.lockPath,
      };
    }),
    scratch: {
      root: layout.root,
      cacheDirs: layout.cacheDirs,
      runsDir: layout.runsDir,
      logsDir: layout.logsDir,
    },
    scripts: { dir: scriptsDir, ...scripts, jobLibrary: siteJobLibraryOutput(scriptsDir) },
    ...siteClustersOutput(site.clusters),
    jobEnvironment: siteJobEnvironment(site),
  };
}

/** The environment's `modules` output: its spec's site modules, absent when it names none. */
export function environmentModulesOutput(spec: {
  modules?: readonly string[];
}): Pick<StackOutputs['environments'][number], 'modules'> {
  const modules = spec.modules ?? [];
  return modules.length > 0 ? { modules: [...modules] } : {};
}

/** The `scripts.jobLibrary` output: where the site keeps this version of the job library, and its sha256. */
export function siteJobLibraryOutput(scriptsDir: string): NonNullable<StackOutputs['scripts']['jobLibrary']> {
  return { path: jobLibraryPath(scriptsDir), sha256: JOB_LIBRARY.sha256 };
}

/** The `jobEnvironment` output: the stack's `env` and its data sets' raw directories. */
export function siteJobEnvironment(
  site: Partial<Pick<SiteDeclaration, 'env' | 'rawData'>>,
): NonNullable<StackOutputs['jobEnvironment']> {
  return { env: { ...(site.env ?? {}) }, rawData: { ...(site.rawData ?? {}) } };
}

/** The `clusters` output: the site's other clusters, their connection without its secret. */
export function siteClustersOutput(
  clusters: SiteDeclaration['clusters'] = [],
): Pick<StackOutputs, 'clusters'> {
  return clusters.length > 0
    ? { clusters: clusters.map((c) => ({ ...c, connection: publicConnection(c.connection) })) }
    : {};
}
