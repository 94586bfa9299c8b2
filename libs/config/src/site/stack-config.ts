// A stack's declared configuration (infra/Pulumi.<stack>.yaml) -> the validated site it declares:
// cluster profile, environment spec, datasets and how the environment is built. The one reading of
// stack config: infra's program builds its resources from it, and the runner predicts the stack's
// outputs from it before the site is provisioned (`runner plan`).
import { isAbsolute, resolve } from 'node:path';
import { clusterPresets } from '../cluster/presets.ts';
import { ClusterProfileSchema, type ClusterProfile } from '../cluster/schema.ts';
import { environmentPresets } from '../environment/presets.ts';
import { environmentClusterProblems, environmentProblems } from '../environment/rules.ts';
import { EnvironmentSpecSchema, type EnvironmentSpec } from '../environment/schema.ts';
import { parseYaml } from '../load/yaml.ts';
import { SCRIPT_VALUES, matchesRule } from '../script-values.ts';

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
  environment: unknown;
  environmentOverrides?: unknown;
  datasets?: unknown;
  build?: unknown;
  scratchGroup?: string;
}

/** The site a stack declares, validated. */
export interface SiteDeclaration {
  profile: ClusterProfile;
  environment: EnvironmentSpec;
  datasets: string[];
  build: EnvironmentBuild;
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
  const environment = parse<EnvironmentSpec>(
    'environment',
    EnvironmentSpecSchema,
    deepMerge(pick('environment', raw.environment, environmentPresets), raw.environmentOverrides),
  );
  const problems = [...environmentProblems(environment), ...environmentClusterProblems(environment, profile)];
  if (problems.length > 0) {
    const lines = problems.map((p) => `environment.${p.path.map(String).join('.')}: ${p.message}`);
    throw new Error(`stack config environment breaks ${problems.length} rule(s):\n${lines.join('\n')}`);
  }
  const datasets = raw.datasets ?? [];
  if (!Array.isArray(datasets) || !datasets.every((d) => matchesRule(SCRIPT_VALUES.name, d))) {
    throw new StackConfigError(
      'datasets',
      datasets,
      `a list of dataset names, each ${SCRIPT_VALUES.name.expected}`,
    );
  }
  const build = (raw.build ?? {}) as Partial<EnvironmentBuild>;
  // The spec names its conda frontend; a stack may override it (e.g. rattler on a test machine).
  const frontend = build.frontend ?? (environment.backend === 'venv' ? 'pip' : environment.frontend);
  if (!(ENVIRONMENT_FRONTENDS as readonly string[]).includes(frontend))
    throw new StackConfigError('build.frontend', frontend, ENVIRONMENT_FRONTENDS.join(' | '));
  const frontendCommand =
    build.frontendCommand ?? (frontend === 'pip' ? 'python3' : frontend === 'rattler' ? 'python3' : frontend);
  const anchor = (p: string) => (isAbsolute(p) ? p : resolve(repoRoot, p));
  return {
    profile,
    environment,
    datasets: datasets as string[],
    build: {
      ...build,
      frontend,
      // A relative command with a slash (`python/.venv/bin/python`) is a repository path.
      frontendCommand: frontendCommand.includes('/') ? anchor(frontendCommand) : frontendCommand,
      ...(build.prefix ? { prefix: anchor(build.prefix) } : {}),
      ...(build.inheritEnvironments ? { inheritEnvironments: build.inheritEnvironments.map(anchor) } : {}),
    },
    ...(raw.scratchGroup !== undefined ? { scratchGroup: raw.scratchGroup } : {}),
  };
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
  const raw: RawSiteConfig = { cluster: get('cluster'), environment: get('environment') };
  for (const key of ['clusterOverrides', 'environmentOverrides', 'datasets', 'build'] as const) {
    const v = get(key);
    if (v !== undefined) raw[key] = v;
  }
  const group = get('scratchGroup');
  if (typeof group === 'string') raw.scratchGroup = group;
  if (raw.cluster === undefined)
    throw new StackConfigError(`${project}:cluster`, undefined, 'a cluster preset or object');
  if (raw.environment === undefined)
    throw new StackConfigError(`${project}:environment`, undefined, 'an environment preset or object');
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
    scriptsDir: `${projectRoot}/scripts`,
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
