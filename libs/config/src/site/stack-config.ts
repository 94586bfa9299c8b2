// A stack's declared configuration (stacks/<stack>.yaml) -> the validated site it declares:
// cluster profile, environment spec, datasets and how the environment is built. The one reading of
// stack config: infra's program builds its resources from it, and the runner predicts the stack's
// outputs from it before the site is provisioned (`runner plan`).
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { clusterPresets } from '../cluster/presets.ts';
import { ClusterProfileSchema, type ClusterProfile } from '../cluster/schema.ts';
import { environmentPresets } from '../environment/presets.ts';
import { environmentClusterProblems, environmentProblems } from '../environment/rules.ts';
import { EnvironmentSpecSchema, type EnvironmentSpec } from '../environment/schema.ts';
import { parseYaml } from '../load/yaml.ts';
import { KernelDeclarationSchema, kernelNameOf, kernelsDirFor, type KernelDeclaration } from './kernel.ts';
import { SCRIPT_VALUES, matchesRule } from '../script-values.ts';
import { JobEnvSchema } from '../pipeline/job-env.ts';

/** Error of this layer: names the stack config key, the value and what was expected. */
export class StackConfigError extends Error {
  constructor(key: string, value: unknown, expected: string) {
    super(`stack config ${key} = ${JSON.stringify(value)}: expected ${expected}`);
    this.name = 'StackConfigError';
  }
}

export const ENVIRONMENT_FRONTENDS = ['conda', 'mamba', 'micromamba', 'rattler', 'pip'] as const;
export type EnvironmentFrontend = (typeof ENVIRONMENT_FRONTENDS)[number];

/** How the environment is built on this site (stack config, not part of the environment spec). */
export interface EnvironmentBuild {
  frontend: EnvironmentFrontend;
  frontendCommand: string;
  /** Default `<projectRoot>/envs/<name>`. */
  prefix?: string;
  pipOptions?: string[];
  inheritEnvironments?: string[];
  timeoutSeconds?: number;
}

/** The raw values of a stack's `kdgat-hpc:*` config keys (objects already parsed). */
export interface RawSiteConfig {
  cluster: unknown;
  clusterOverrides?: unknown;
  /**
   * The site's other clusters, reached from the same login node with `-M` (OSC: Pitzer, Ascend and
   * Cardinal under one account and one set of filesystems): a list whose entries are a preset name
   * or `{ preset: <name>, <field>: <override>… }` / a ClusterProfile object. Each keeps its own
   * partitions, modules, charging and limits; the connection, account and paths are the site's.
   */
  clusters?: unknown;
  /**
   * The site's environments: a list whose entries are a preset name, an EnvironmentSpec object,
   * `{ preset: <name>, <field>: <override>… }` or `{ file: <EnvironmentSpec YAML> }`; any entry may add `build:` (how this one is built,
   * over the stack's `build`) and `kernel:` (its Jupyter kernel).
   */
  environments?: unknown;
  /** One environment (stacks written before `environments`): the same as a one-entry list. */
  environment?: unknown;
  environmentOverrides?: unknown;
  /**
   * The data sets the site keeps a scratch cache for: names, or `{ name, raw: <dir> }` naming where
   * that data set's raw recordings are on the site (over `rawDataRoot`).
   */
  datasets?: unknown;
  /** The site's raw recordings, one directory per data set (`<rawDataRoot>/<dataset>`), e.g. on /fs/ess. */
  rawDataRoot?: unknown;
  /** Variables every job on this site exports (site facts), over the pipeline's `env`. */
  env?: unknown;
  build?: unknown;
  scratchGroup?: string;
}

/** One environment of a site: what it is, how it is built there, and its notebook kernel. */
export interface SiteEnvironment {
  spec: EnvironmentSpec;
  build: EnvironmentBuild;
  kernel?: KernelDeclaration;
}

/** The site a stack declares, validated. */
export interface SiteDeclaration {
  profile: ClusterProfile;
  /** The site's other clusters (`clusters`), each sharing the profile's connection, account and paths. */
  clusters: ClusterProfile[];
  /** In the stack's order; the first is the stack's default (the site scripts' environment). */
  environments: SiteEnvironment[];
  datasets: string[];
  /** Each data set's raw recordings on the site, where the stack declares them. */
  rawData: Record<string, string>;
  /** The stack's `env`: variables every job on the site exports. */
  env: Record<string, string>;
  scratchGroup?: string;
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Objects merge key by key; anything else (arrays included) replaces. */
export function deepMerge(base: unknown, patch: unknown): unknown {
  if (!isObject(base) || !isObject(patch)) return patch === undefined ? base : patch;
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(patch)) out[k] = deepMerge(base[k], v);
  return out;
}

function pick<T>(key: string, value: unknown, presets: Record<string, T>): unknown {
  if (typeof value === 'string') {
    const preset = presets[value];
    if (!preset)
      throw new StackConfigError(key, value, `one of ${Object.keys(presets).join(', ')} or an object`);
    return preset;
  }
  if (isObject(value)) return value;
  throw new StackConfigError(key, value, `a preset name (${Object.keys(presets).join(', ')}) or an object`);
}

function parse<T>(
  key: string,
  schema: {
    safeParse(
      v: unknown,
    ):
      | { success: true; data: T }
      | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
  },
  value: unknown,
): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => `${key}.${i.path.map(String).join('.')}: ${i.message}`).join('; ');
  throw new Error(`stack config ${key} is not valid: ${issues}`);
}

/** Relative profile paths (the local stack's `.hpc/…`) are taken from the repository root. */
function anchorPaths(profile: ClusterProfile, repoRoot: string): ClusterProfile {
  const paths = Object.fromEntries(
    Object.entries(profile.paths).map(([k, p]) => [
      k,
      typeof p === 'string' && !isAbsolute(p) ? resolve(repoRoot, p) : p,
    ]),
  ) as ClusterProfile['paths'];
  return { ...profile, paths };
}

/** The stack's environment entries as written, the one-environment form read as a one-entry list. */
function environmentEntries(raw: RawSiteConfig): unknown[] {
  if (raw.environments !== undefined && raw.environment !== undefined)
    throw new StackConfigError(
      'environment',
      raw.environment,
      'no `environment` beside `environments` (move it into the list)',
    );
  if (raw.environments !== undefined) {
    if (!Array.isArray(raw.environments) || raw.environments.length === 0)
      throw new StackConfigError(
        'environments',
        raw.environments,
        'a non-empty list of environment preset names or objects',
      );
    return raw.environments;
  }
  if (raw.environment === undefined)
    throw new StackConfigError('environments', undefined, 'a list of environment preset names or objects');
  return [
    raw.environmentOverrides === undefined
      ? raw.environment
      : {
          spec: deepMerge(pick('environment', raw.environment, environmentPresets), raw.environmentOverrides),
        },
  ];
}

/**
 * `{ file: <EnvironmentSpec YAML> }`: the environment a spec names by file (a declared pipeline's, such
 * as examples/pipelines/tiny-lightning.environment.yaml), read from the same file, so the two agree.
 */
function environmentFile(key: string, file: unknown, repoRoot: string): unknown {
  if (typeof file !== 'string' || !/\.ya?ml$/.test(file))
    throw new StackConfigError(key, file, 'an EnvironmentSpec .yaml/.yml file, relative to the repository');
  const path = isAbsolute(file) ? file : resolve(repoRoot, file);
  if (!existsSync(path)) throw new StackConfigError(key, file, `an existing file (${path} is missing)`);
  const yaml = parseYaml(readFileSync(path, 'utf8'), path);
  if (yaml.syntaxIssues.length > 0)
    throw new StackConfigError(
      key,
      file,
      `a YAML file (${path}:${yaml.syntaxIssues[0]!.line ?? '?'}: ${yaml.syntaxIssues[0]!.message})`,
    );
  return yaml.value;
}

/** One entry of `environments` -> its spec (checked against the rules and the cluster), build and kernel. */
function siteEnvironment(
  entry: unknown,
  key: string,
  profile: ClusterProfile,
  stackBuild: Partial<EnvironmentBuild>,
  repoRoot: string,
): SiteEnvironment {
  let specValue: unknown;
  let build: Partial<EnvironmentBuild> = stackBuild;
  let kernel: unknown;
  if (typeof entry === 'string') specValue = pick(key, entry, environmentPresets);
  else if (isObject(entry)) {
    const { preset, build: own, kernel: k, spec, file, ...fields } = entry;
    if (own !== undefined && !isObject(own)) throw new StackConfigError(`${key}.build`, own, 'an object');
    build = { ...stackBuild, ...((own ?? {}) as Partial<EnvironmentBuild>) };
    kernel = k;
    specValue =
      spec !== undefined
        ? spec
        : file !== undefined
          ? deepMerge(environmentFile(`${key}.file`, file, repoRoot), fields)
          : preset !== undefined
            ? deepMerge(pick(`${key}.preset`, preset, environmentPresets), fields)
            : fields;
  } else throw new StackConfigError(key, entry, 'a preset name or an object');
  const environment = parse<EnvironmentSpec>(key, EnvironmentSpecSchema, specValue);
  const problems = [...environmentProblems(environment), ...environmentClusterProblems(environment, profile)];
  if (problems.length > 0) {
    const lines = problems.map((p) => `${key}.${p.path.map(String).join('.')}: ${p.message}`);
    throw new Error(
      `stack config environment ${environment.name} breaks ${problems.length} rule(s):\n${lines.join('\n')}`,
    );
  }
  // The spec names its conda frontend; a stack may override it (e.g. rattler on a test machine).
  const frontend = build.frontend ?? (environment.backend === 'venv' ? 'pip' : environment.frontend);
  if (!(ENVIRONMENT_FRONTENDS as readonly string[]).includes(frontend))
    throw new StackConfigError(`${key}.build.frontend`, frontend, ENVIRONMENT_FRONTENDS.join(' | '));
  const frontendCommand =
    build.frontendCommand ?? (frontend === 'pip' ? 'python3' : frontend === 'rattler' ? 'python3' : frontend);
  const anchor = (p: string) => (isAbsolute(p) ? p : resolve(repoRoot, p));
  return {
    spec: environment,
    build: {
      ...build,
      frontend,
      // A relative command with a slash (`python/.venv/bin/python`) is a repository path.
      frontendCommand: frontendCommand.includes('/') ? anchor(frontendCommand) : frontendCommand,
      ...(build.prefix ? { prefix: anchor(build.prefix) } : {}),
      ...(build.inheritEnvironments ? { inheritEnvironments: build.inheritEnvironments.map(anchor) } : {}),
    },
    ...(kernel !== undefined
      ? { kernel: parse<KernelDeclaration>(`${key}.kernel`, KernelDeclarationSchema, kernel) }
      : {}),
  };
}

/** What every cluster of a site shares: one login node, one account, one set of filesystems. */
const SHARED_CLUSTER_FIELDS = ['connection', 'account', 'accountRequired', 'paths', 'scheduler'] as const;

/**
 * The site's other clusters (`clusters`): each a preset or object, validated as a cluster profile
 * with the site's connection, account and paths; names and SLURM cluster names unique on the site.
 */
function siteClusters(raw: unknown, profile: ClusterProfile): ClusterProfile[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw))
    throw new StackConfigError('clusters', raw, 'a list of cluster preset names or objects');
  const shared = Object.fromEntries(SHARED_CLUSTER_FIELDS.map((k) => [k, profile[k]]));
  const seen = new Map([[profile.clusterName, 'cluster']]);
  const names = new Set([profile.name]);
  return raw.map((entry, i) => {
    const key = `clusters[${i}]`;
    let value: unknown;
    if (typeof entry === 'string') value = pick(key, entry, clusterPresets);
    else if (isObject(entry)) {
      const { preset, ...fields } = entry;
      for (const k of SHARED_CLUSTER_FIELDS)
        if (k in fields)
          throw new StackConfigError(
            `${key}.${k}`,
            fields[k],
            `nothing: a site's clusters share its ${k} (the stack's cluster's); leave it out`,
          );
      value =
        preset !== undefined ? deepMerge(pick(`${key}.preset`, preset, clusterPresets), fields) : fields;
    } else throw new StackConfigError(key, entry, 'a cluster preset name or an object');
    const member = parse<ClusterProfile>(key, ClusterProfileSchema, { ...(value as Json), ...shared });
    if (names.has(member.name))
      throw new StackConfigError(`${key}.name`, member.name, 'a name no other cluster of the stack has');
    const other = seen.get(member.clusterName);
    if (other)
      throw new StackConfigError(
        `${key}.clusterName`,
        member.clusterName,
        `a SLURM cluster name (-M) no other cluster of the stack has (${other} has it)`,
      );
    names.add(member.name);
    seen.set(member.clusterName, key);
    return member;
  });
}

/** The validated site from raw stack config values (pure; secrets are the caller's business). */
export function siteFromStackConfig(raw: RawSiteConfig, repoRoot: string): SiteDeclaration {
  const profile = anchorPaths(
    parse<ClusterProfile>(
      'cluster',
      ClusterProfileSchema,
      deepMerge(pick('cluster', raw.cluster, clusterPresets), raw.clusterOverrides),
    ),
    repoRoot,
  );
  if (raw.build !== undefined && !isObject(raw.build))
    throw new StackConfigError('build', raw.build, 'an object');
  const stackBuild = (raw.build ?? {}) as Partial<EnvironmentBuild>;
  const entries = environmentEntries(raw);
  const environments = entries.map((entry, i) =>
    siteEnvironment(entry, `environments[${i}]`, profile, stackBuild, repoRoot),
  );
  const seen = new Set<string>();
  environments.forEach(({ spec, build }, i) => {
    if (seen.has(spec.name))
      throw new StackConfigError(
        `environments[${i}].name`,
        spec.name,
        'a name no other environment of the stack has (each is its own prefix, lock and resource)',
      );
    seen.add(spec.name);
    if (build.prefix !== undefined && environments.length > 1)
      throw new StackConfigError(
        `environments[${i}].build.prefix`,
        build.prefix,
        'no fixed prefix on a stack of several environments (each gets <projectRoot>/envs/<name>)',
      );
  });
  const kernels = environments.flatMap((e, i) =>
    e.kernel ? [{ i, name: kernelNameOf(e.kernel, e.spec.name) }] : [],
  );
  if (kernels.length > 0 && kernelsDirFor(profile) === null)
    throw new StackConfigError(
      'clusterOverrides.paths.kernelsDir',
      undefined,
      "the site user's Jupyter kernels directory for the kernels the environments declare: an absolute <home>/.local/share/jupyter/kernels (`echo $HOME` on the login node)",
    );
  // Jupyter looks kernels up by lower-cased name: two that differ only in case are one.
  kernels.forEach(({ i, name }, k) => {
    if (kernels.slice(0, k).some((other) => other.name.toLowerCase() === name.toLowerCase()))
      throw new StackConfigError(
        `environments[${i}].kernel.name`,
        name,
        'a kernel name no other kernel of the stack has (Jupyter compares them lower-cased)',
      );
  });
  const { datasets, rawData } = siteDatasets(raw, repoRoot);
  const env = raw.env === undefined ? {} : parse('env', JobEnvSchema, raw.env);
  return {
    profile,
    clusters: siteClusters(raw.clusters, profile),
    environments,
    datasets,
    rawData,
    env,
    ...(raw.scratchGroup !== undefined ? { scratchGroup: raw.scratchGroup } : {}),
  };
}

/**
 * The stack's data sets and where their raw recordings are: `datasets` entries are names or
 * `{ name, raw }`; `rawDataRoot` gives `<root>/<name>` to the others. Relative paths (the local
 * stack's) are taken from the repository root, like the profile's.
 */
function siteDatasets(
  raw: Pick<RawSiteConfig, 'datasets' | 'rawDataRoot'>,
  repoRoot: string,
): { datasets: string[]; rawData: Record<string, string> } {
  const entries = raw.datasets ?? [];
  const expected = `a list of dataset names (each ${SCRIPT_VALUES.name.expected}) or { name, raw: <directory of its raw recordings> }`;
  if (!Array.isArray(entries)) throw new StackConfigError('datasets', entries, expected);
  const sitePath = (key: string, v: unknown): string => {
    if (!matchesRule(SCRIPT_VALUES.sitePath, v))
      throw new StackConfigError(key, v, SCRIPT_VALUES.sitePath.expected);
    return isAbsolute(v) ? v.replace(/\/+$/, '') : resolve(repoRoot, v);
  };
  const root = raw.rawDataRoot === undefined ? undefined : sitePath('rawDataRoot', raw.rawDataRoot);
  const datasets: string[] = [];
  const rawData: Record<string, string> = {};
  entries.forEach((entry: unknown, i) => {
    const name = isObject(entry) ? entry['name'] : entry;
    if (!matchesRule(SCRIPT_VALUES.name, name)) throw new StackConfigError(`datasets[${i}]`, entry, expected);
    if (isObject(entry)) {
      const extra = Object.keys(entry).filter((k) => k !== 'name' && k !== 'raw');
      if (extra.length > 0)
        throw new StackConfigError(`datasets[${i}].${extra[0]}`, entry[extra[0]!], 'only name and raw');
    }
    if (datasets.includes(name)) throw new StackConfigError(`datasets[${i}]`, name, 'a data set named once');
    datasets.push(name);
    const dir =
      isObject(entry) && entry['raw'] !== undefined
        ? sitePath(`datasets[${i}].raw`, entry['raw'])
        : undefined;
    if (dir !== undefined) rawData[name] = dir;
    else if (root !== undefined) rawData[name] = `${root}/${name}`;
  });
  return { datasets, rawData };
}

/** A config value that is either a preset name (plain text) or an object (stored as JSON text). */
export function presetOrObject(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/**
 * The raw site config of a stack file (`Pulumi.<stack>.yaml`: `config: { <project>:<key>: value }`),
 * as Pulumi would hand it to the program. Secure values (`{ secure: … }`) are not read.
 */
export function rawSiteConfigFromStackFile(text: string, project: string, file?: string): RawSiteConfig {
  const yaml = parseYaml(text, file);
  if (yaml.syntaxIssues.length > 0)
    throw new Error(
      `${file ?? 'stack file'}: ${yaml.syntaxIssues[0]!.message} (line ${yaml.syntaxIssues[0]!.line ?? '?'})`,
    );
  const config = isObject(yaml.value) && isObject(yaml.value['config']) ? yaml.value['config'] : {};
  const get = (key: string): unknown => presetOrObject(config[`${project}:${key}`]);
  const raw: RawSiteConfig = { cluster: get('cluster') };
  for (const key of [
    'clusterOverrides',
    'clusters',
    'environments',
    'environment',
    'environmentOverrides',
    'datasets',
    'rawDataRoot',
    'env',
    'build',
  ] as const) {
    const v = get(key);
    if (v !== undefined) raw[key] = v;
  }
  const group = get('scratchGroup');
  if (typeof group === 'string') raw.scratchGroup = group;
  if (raw.cluster === undefined)
    throw new StackConfigError(`${project}:cluster`, undefined, 'a cluster preset or object');
  if (raw.environments === undefined && raw.environment === undefined)
    throw new StackConfigError(
      `${project}:environments`,
      undefined,
      'a list of environment presets or objects',
    );
  return raw;
}

/** Where a site keeps its environments and scripts (what ClusterSite provisions). */
export interface SitePaths {
  /** `<projectRoot>/envs`: environment.yml and the lock of each environment. */
  envsDir: string;
  prefix: string;
  specPath: string;
  lockPath: string;
  scriptsDir: string;
}

/** Where the site scripts are installed: `<projectRoot>/scripts` (one set per site). */
export function siteScriptsDir(profile: Pick<ClusterProfile, 'paths'>): string {
  return `${profile.paths.projectRoot}/scripts`;
}

export function sitePathsFor(
  profile: Pick<ClusterProfile, 'paths'>,
  environmentName: string,
  build: Pick<EnvironmentBuild, 'prefix'> = {},
): SitePaths {
  const projectRoot = profile.paths.projectRoot;
  const envsDir = `${projectRoot}/envs`;
  return {
    envsDir,
    prefix: build.prefix ?? `${envsDir}/${environmentName}`,
    ...environmentFilesIn(envsDir, environmentName),
    scriptsDir: siteScriptsDir(profile),
  };
}

/** The environment.yml and the explicit lock of an environment, on the target. */
export function environmentFilesIn(
  envsDir: string,
  environmentName: string,
): { specPath: string; lockPath: string } {
  return {
    specPath: `${envsDir}/${environmentName}.environment.yml`,
    lockPath: `${envsDir}/${environmentName}.lock.txt`,
  };
}
