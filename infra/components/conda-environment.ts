import * as pulumi from '@pulumi/pulumi';
import { environmentFilesIn, type EnvironmentFrontend, type EnvironmentSpec } from '@kdgat/config';
import { Environment } from '../providers/environment.ts';
import { ymlForDisplay } from '../providers/environment-spec.ts';
import { frontendFor } from '../providers/frontends/index.ts';
import type { Connection } from '@kdgat/transport';
import type { SiteModules } from '../providers/module-shell.ts';

/** The fields of @kdgat/config's EnvironmentSpec this component reads (a full spec is accepted as is). */
export type EnvironmentSpecView = Pick<EnvironmentSpec, 'name' | 'backend' | 'adopt'>;

export interface CondaEnvironmentArgs {
  spec: EnvironmentSpecView;
  /** Canonical environment.yml text (`renderEnvironmentYml`) and its hash (`environmentSpecHash`). */
  environmentYml: string;
  specHash: string;
  connection: pulumi.Input<Connection>;
  /** `<project>/<stack>`, recorded as the environment's owner. */
  owner: string;
  prefix: string;
  /** Where environment.yml and the lock are written on the target. */
  envsDir: string;
  frontend: EnvironmentFrontend;
  frontendCommand: string;
  /** The CUDA (major.minor) the spec targets (`cudaOf`): the solve is told it (CONDA_OVERRIDE_CUDA), a login node has no GPU. */
  cudaVersion?: string;
  pipOptions?: string[];
  inheritEnvironments?: string[];
  timeoutSeconds?: number;
  /** The cluster profile's name and modules: the frontend runs after they are loaded (module-shell.ts). */
  profile?: string;
  modules?: SiteModules;
  /** The environment's own site modules (spec `modules`), loaded after the profile's. */
  environmentModules?: readonly string[];
}

/** The `gnn-rapids` environment (or a venv on CPU machines), built from the spec on the target. */
export class CondaEnvironment extends pulumi.ComponentResource {
  readonly name: string;
  readonly backend: 'conda' | 'venv';
  readonly prefix: string;
  readonly specHash: string;
  readonly specPath: string;
  readonly lockPath: string;
  readonly lock: pulumi.Output<string>;
  readonly lockHash: pulumi.Output<string>;
  readonly installedPackages: pulumi.Output<string>;

  constructor(name: string, args: CondaEnvironmentArgs, opts?: pulumi.ComponentResourceOptions) {
    super('kdgat:hpc:CondaEnvironment', name, {}, opts);
    const { spec } = args;
    // Which backend a frontend builds is the frontend's (providers/frontends/).
    const frontend = frontendFor(args.frontend);
    if (frontend.backend !== spec.backend) {
      throw new Error(
        spec.backend === 'venv'
          ? `environment ${spec.name}: backend 'venv' is built with frontend 'pip', got frontend '${args.frontend}'`
          : `environment ${spec.name}: backend 'conda' needs a conda frontend (conda, mamba, micromamba, rattler), got '${args.frontend}'`,
      );
    }
    this.name = spec.name;
    this.backend = spec.backend;
    this.prefix = args.prefix;
    this.specHash = args.specHash;
    const files = environmentFilesIn(args.envsDir, spec.name);
    this.specPath = files.specPath;
    this.lockPath = files.lockPath;
    const env = new Environment(
      name,
      {
        connection: args.connection,
        owner: args.owner,
        name: spec.name,
        backend: spec.backend,
        frontend: args.frontend,
        frontendCommand: args.frontendCommand,
        prefix: args.prefix,
        environmentYml: ymlForDisplay(args.environmentYml),
        specHash: args.specHash,
        solveEnvironment: frontend.solveEnvironment(args.cudaVersion),
        pipOptions: args.pipOptions ?? [],
        inheritEnvironments: args.inheritEnvironments ?? [],
        specPath: this.specPath,
        lockPath: this.lockPath,
        adopt: spec.adopt,
        timeoutSeconds: args.timeoutSeconds ?? 3 * 3600,
        profile: args.profile ?? '',
        modules: args.modules ?? {},
        // Only where there are some: the inputs of an environment without them stay as they were.
        ...(args.environmentModules !== undefined && args.environmentModules.length > 0
          ? { environmentModules: [...args.environmentModules] }
          : {}),
      },
      { parent: this },
    );
    this.lock = env.lock;
    this.lockHash = env.lockHash;
    this.installedPackages = env.installedPackages;
    this.registerOutputs({
      prefix: this.prefix,
      specHash: this.specHash,
      lockPath: this.lockPath,
      lockHash: this.lockHash,
    });
  }
}
