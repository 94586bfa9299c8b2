import * as pulumi from '@pulumi/pulumi';
import {
  cudaOf,
  publicConnection,
  environmentSpecHash,
  kernelDefaultCodeFor,
  kernelsDirFor,
  renderEnvironmentYml,
  scratchLayoutFor,
  sitePathsFor,
  siteScriptsDir,
  type ClusterProfile,
  type SiteEnvironment,
  type StackOutputs,
} from '@kdgat/config';
import {
  JOB_LIBRARY,
  SITE_SCRIPT_NAMES,
  activationSnippet,
  environmentModulesOutput,
  renderSiteScripts,
  siteClustersOutput,
  siteJobEnvironment,
} from '@kdgat/slurm-templates';
import type { Connection } from '@kdgat/transport';
import { CondaEnvironment } from './conda-environment.ts';
import { JupyterKernel } from './jupyter-kernel.ts';
import { ScratchCacheLayout } from './scratch-cache-layout.ts';
import { SlurmTemplates } from './slurm-templates.ts';

export type { EnvironmentBuild, SiteEnvironment } from '@kdgat/config';

export interface ClusterSiteArgs {
  profile: ClusterProfile;
  /** The site's other clusters (stack config `clusters`), exported for the runner's placement. */
  clusters?: ClusterProfile[];
  /** In the stack's order: the first is the stack's default, the site scripts' environment. */
  environments: SiteEnvironment[];
  datasets: string[];
  /** Each data set's raw recordings on the site (stack config `rawDataRoot`, `datasets[].raw`). */
  rawData?: Record<string, string>;
  /** Variables every job on the site exports (stack config `env`). */
  env?: Record<string, string>;
  /** The connection with its private key as a Pulumi secret. */
  connection: pulumi.Input<Connection>;
  /** `<project>/<stack>`. */
  owner: string;
  scratchGroup?: string;
}

/** A value as the program holds it: known now, or a Pulumi output resolved by the deployment. */
type Deployed<T> = T extends object ? { [K in keyof T]: Deployed<T[K]> } : T | pulumi.Output<T>;

type EnvironmentOutputs = StackOutputs['environments'][number];

/**
 * Stack outputs, the contract with the runner (`StackOutputsSchema` of @kdgat/config, docs/CONTRACTS.md
 * "Stack outputs"); the program always exports each environment's lock.
 */
export type SiteOutputs = Omit<Deployed<StackOutputs>, 'environments'> & {
  environments: pulumi.Output<(EnvironmentOutputs & { lock: string })[]>;
};

/**
 * One cluster as declared: its environments (each its own resource, lock and kernel), the scratch
 * cache layout and the SLURM scripts.
 */
export class ClusterSite extends pulumi.ComponentResource {
  readonly outputs: SiteOutputs;

  constructor(name: string, args: ClusterSiteArgs, opts?: pulumi.ComponentResourceOptions) {
    super('kdgat:hpc:ClusterSite', name, {}, opts);
    const { profile, connection } = args;
    const layout = scratchLayoutFor(profile, args.datasets);

    const kernelsDir = kernelsDirFor(profile);
    const codePath = kernelDefaultCodeFor(profile);
    const environments = args.environments.map(({ spec, build, kernel }, i) => {
      // The same paths the runner predicts for a stack not provisioned yet (declaredSiteOutputs).
      const paths = sitePathsFor(profile, spec.name, build);
      const cuda = cudaOf(spec);
      const view = { ...spec, prefix: paths.prefix };
      const env = new CondaEnvironment(
        `${name}-env-${spec.name}`,
        {
          spec,
          environmentYml: renderEnvironmentYml(spec),
          specHash: environmentSpecHash(spec),
          connection,
          owner: args.owner,
          prefix: paths.prefix,
          envsDir: paths.envsDir,
          ...(cuda ? { cudaVersion: `${cuda.major}.${cuda.minor}` } : {}),
          ...build,
          profile: profile.name,
          modules: profile.modules,
          environmentModules: spec.modules,
        },
        // A stack of one environment, provisioned before there were several, kept it as `<name>-env`.
        { parent: this, ...(i === 0 ? { aliases: [{ name: `${name}-env` }] } : {}) },
      );
      if (kernel) {
        if (kernelsDir === null)
          throw new Error(
            `environment ${spec.name} declares a kernel, but the profile of ${profile.name} names no paths.kernelsDir: ` +
              `set clusterOverrides.paths.kernelsDir to the site user's <home>/.local/share/jupyter/kernels`,
          );
        // A child of its environment: removing the environment removes its kernel.
        new JupyterKernel(
          `${name}-kernel-${spec.name}`,
          {
            kernel,
            environment: {
              name: spec.name,
              prefix: paths.prefix,
              activate: activationSnippet(view, profile),
              lockHash: env.lockHash,
            },
            profile,
            kernelsDir,
            ...(codePath !== undefined ? { codePath } : {}),
            connection,
          },
          { parent: env },
        );
      }
      const outputs = pulumi.all([env.lockHash, env.lock]).apply(([lockHash, lock]) => ({
        name: env.name,
        backend: env.backend,
        prefix: env.prefix,
        ...environmentModulesOutput(spec),
        activate: activationSnippet(view, profile),
        specHash: env.specHash,
        lockPath: env.lockPath,
        lockHash,
        lock,
      }));
      return { view, outputs };
    });
    const scratch = new ScratchCacheLayout(
      `${name}-scratch`,
      { layout, connection, clusterName: profile.clusterName, group: args.scratchGroup },
      { parent: this },
    );
    const scriptsDir = siteScriptsDir(profile);
    const scripts = new SlurmTemplates(
      `${name}-scripts`,
      {
        // The hand-use scripts run the stack's default environment.
        // The hand-use scripts' job library error names this stack's `infra:up`.
        scripts: renderSiteScripts(profile, environments[0]!.view, layout, {
          scriptsDir,
          stack: args.owner.slice(args.owner.indexOf('/') + 1),
        }),
        names: SITE_SCRIPT_NAMES,
        library: JOB_LIBRARY,
        dir: scriptsDir,
        connection,
      },
      { parent: this },
    );

    this.outputs = {
      profile: profile.name,
      connection: publicConnection(profile.connection),
      environments: pulumi.all(environments.map((e) => e.outputs)),
      scratch: {
        root: scratch.root,
        cacheDirs: scratch.cacheDirs,
        runsDir: scratch.runsDir,
        logsDir: scratch.logsDir,
      },
      // SITE_SCRIPT_NAMES' keys; infra/test/stacks.test.ts parses the outputs against the schema
      scripts: {
        dir: scripts.dir,
        ...(scripts.paths as Omit<StackOutputs['scripts'], 'dir' | 'jobLibrary'>),
        ...(scripts.jobLibrary ? { jobLibrary: scripts.jobLibrary } : {}),
      },
      ...siteClustersOutput(args.clusters),
      jobEnvironment: siteJobEnvironment(args),
    };
    this.registerOutputs({ ...this.outputs });
  }
}
