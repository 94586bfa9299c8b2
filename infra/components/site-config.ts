// Stack config -> validated ClusterSite arguments. Presets come from @kdgat/config; a stack
// names one and may override fields; the result is validated by the config schemas.
import { isAbsolute, resolve } from 'node:path';
import * as pulumi from '@pulumi/pulumi';
import {
  ClusterProfileSchema,
  EnvironmentSpecSchema,
  environmentProblems,
  clusterPresets,
  environmentPresets,
  type ClusterProfile,
  type EnvironmentSpec,
} from '@kdgat/config';
import type { Connection } from '../providers/executor.ts';
import type { ClusterSiteArgs, EnvironmentBuild } from './cluster-site.ts';

/** Error of this layer: names the stack config key, the value and what was expected. */
export class StackConfigError extends Error {
  constructor(key: string, value: unknown, expected: string) {
    super(`stack config ${key} = ${JSON.stringify(value)}: expected ${expected}`);
    this.name = 'StackConfigError';
  }
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

export interface RawSiteConfig {
  cluster: unknown;
  clusterOverrides?: unknown;
  environment: unknown;
  environmentOverrides?: unknown;
  datasets?: unknown;
  build?: unknown;
  scratchGroup?: string;
}

/** Validated site arguments from raw config values (pure; the secret key is added by the caller). */
export function siteArgsFrom(
  raw: RawSiteConfig,
  repoRoot: string,
): Omit<ClusterSiteArgs, 'connection' | 'owner'> & { connection: Connection } {
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
  const problems = environmentProblems(environment);
  if (problems.length > 0) {
    const lines = problems.map((p) => `environment.${p.path.map(String).join('.')}: ${p.message}`);
    throw new Error(`stack config environment breaks ${problems.length} rule(s):\n${lines.join('\n')}`);
  }
  const datasets = raw.datasets ?? [];
  if (
    !Array.isArray(datasets) ||
    !datasets.every((d) => typeof d === 'string' && /^[A-Za-z0-9_.-]+$/.test(d))
  ) {
    throw new StackConfigError('datasets', datasets, 'a list of dataset names (letters, digits, _ . -)');
  }
  const build = (raw.build ?? {}) as Partial<EnvironmentBuild>;
  const frontends = ['conda', 'mamba', 'micromamba', 'rattler', 'pip'];
  // The spec names its conda frontend; a stack may override it (e.g. rattler on a test machine).
  const frontend = build.frontend ?? (environment.backend === 'venv' ? 'pip' : environment.frontend);
  if (!frontends.includes(frontend))
    throw new StackConfigError('build.frontend', frontend, frontends.join(' | '));
  const frontendCommand =
    build.frontendCommand ?? (frontend === 'pip' ? 'python3' : frontend === 'rattler' ? 'python3' : frontend);
  const anchor = (p: string) => (isAbsolute(p) ? p : resolve(repoRoot, p));
  return {
    profile,
    environment,
    datasets: datasets as string[],
    connection: profile.connection as Connection,
    build: {
      ...build,
      frontend,
      // A relative command with a slash (`python/.venv/bin/python`) is a repository path.
      frontendCommand: frontendCommand.includes('/') ? anchor(frontendCommand) : frontendCommand,
      ...(build.prefix ? { prefix: anchor(build.prefix) } : {}),
      ...(build.inheritEnvironments ? { inheritEnvironments: build.inheritEnvironments.map(anchor) } : {}),
    },
    scratchGroup: raw.scratchGroup,
  };
}

/** A config value that is either a preset name (plain text) or an object (stored as JSON). */
function presetOrObject(config: pulumi.Config, key: string): unknown {
  const raw = config.require(key);
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** Reads the stack's config; the SSH private key (config secret `sshPrivateKey`) stays a secret. */
export function readSiteConfig(config: pulumi.Config, repoRoot: string): ClusterSiteArgs {
  const args = siteArgsFrom(
    {
      cluster: presetOrObject(config, 'cluster'),
      clusterOverrides: config.getObject('clusterOverrides'),
      environment: presetOrObject(config, 'environment'),
      environmentOverrides: config.getObject('environmentOverrides'),
      datasets: config.getObject('datasets'),
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
