import * as pulumi from '@pulumi/pulumi';
import {
  cudaOf,
  publicConnection,
  environmentSpecHash,
  renderEnvironmentYml,
  scratchLayoutFor,
  sitePathsFor,
  type ClusterProfile,
  type EnvironmentBuild,
  type EnvironmentSpec,
  type StackOutputs,
} from '@kdgat/config';
import { SITE_SCRIPT_NAMES, activationSnippet, renderSiteScripts } from '@kdgat/slurm-templates';
import type { Connection } from '@kdgat/transport';
import { CondaEnvironment } from './conda-environment.ts';
import { ScratchCacheLayout } from './scratch-cache-layout.ts';
import { SlurmTemplates } from './slurm-templates.ts';

export type { EnvironmentBuild } from '@kdgat/config';

export interface ClusterSiteArgs {
  profile: ClusterProfile;
  environment: EnvironmentSpec;
  datasets: string[];
  /** The connection with its private key as a Pulumi secret. */
  connection: pulumi.Input<Connection>;
  build: EnvironmentBuild;
  /** `<project>/<stack>`. */
  owner: string;
  scratchGroup?: string;
}

/** A value as the program holds it: known now, or a Pulumi output resolved by the deployment. */
type Deployed<T> = T extends object ? { [K in keyof T]: Deployed<T[K]> } : T | pulumi.Output<T>;

/**
 * Stack outputs, the contract with the runner (`StackOutputsSchema` of @kdgat/config, docs/CONTRACTS.md
 * "Stack outputs"); the program always exports the lock.
 */
export type SiteOutputs = Deployed<StackOutputs> & { environment: { lock: pulumi.Output<string> } };

/** One cluster as declared: environment, scratch cache layout and SLURM scripts. */
export class ClusterSite extends pulumi.ComponentResource {
  readonly outputs: SiteOutputs;

  constructor(name: string, args: ClusterSiteArgs, opts?: pulumi.ComponentResourceOptions) {
    super('kdgat:hpc:ClusterSite', name, {}, opts);
    const { profile, environment, connection } = args;
    // The same paths the runner predicts for a stack not provisioned yet (declaredSiteOutputs).
    const paths = sitePathsFor(profile, environment.name, args.build);
    const prefix = paths.prefix;
    const layout = scratchLayoutFor(profile, args.datasets);
    const envView = { ...environment, prefix };
    const cuda = cudaOf(environment);

    const env = new CondaEnvironment(
      `${name}-env`,
      {
        spec: environment,
        environmentYml: renderEnvironmentYml(environment),
        specHash: environmentSpecHash(environment),
        connection,
        owner: args.owner,
        prefix,
        envsDir: paths.envsDir,
        ...(cuda ? { cudaVersion: `${cuda.major}.${cuda.minor}` } : {}),
        ...args.build,
        profile: profile.name,
        modules: profile.modules,
      },
      { parent: this },
    );
    const scratch = new ScratchCacheLayout(
      `${name}-scratch`,
      { layout, connection, clusterName: profile.clusterName, group: args.scratchGroup },
      { parent: this },
    );
    const scriptsDir = paths.scriptsDir;
    const scripts = new SlurmTemplates(
      `${name}-scripts`,
      {
        scripts: renderSiteScripts(profile, envView, layout, { scriptsDir }),
        names: SITE_SCRIPT_NAMES,
        dir: scriptsDir,
        connection,
      },
      { parent: this },
    );

    this.outputs = {
      profile: profile.name,
      connection: publicConnection(profile.connection),
      environment: {
        name: env.name,
        backend: env.backend,
        prefix: env.prefix,
        activate: activationSnippet(envView, profile),
        specHash: env.specHash,
        lockPath: env.lockPath,
        lockHash: env.lockHash,
        lock: env.lock,
      },
      scratch: {
        root: scratch.root,
        cacheDirs: scratch.cacheDirs,
        runsDir: scratch.runsDir,
        logsDir: scratch.logsDir,
      },
      // SITE_SCRIPT_NAMES' keys; infra/test/stacks.test.ts parses the outputs against the schema
      scripts: { dir: scripts.dir, ...(scripts.paths as Omit<StackOutputs['scripts'], 'dir'>) },
    };
    this.registerOutputs({ ...this.outputs });
  }
}
