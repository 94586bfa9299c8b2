// A Python environment on the target (conda-family or venv), built from a canonical spec by one
// of the frontends (frontends/: conda, mamba, micromamba, rattler, pip), chosen by name: the
// provider picks the frontend, asks it for the plan, then runs build → lock → list.
//
// Ownership: before building, the provider writes `<prefix>.kdgat-owner.json` naming the stack.
// A prefix that exists without this stack's marker is refused unless `adopt` is set; a half-built
// prefix that carries the marker (an interrupted `up`) is ours and is rebuilt on the next `up`.
// Updates rebuild the environment from scratch, because `conda env update --prune` does not
// reliably remove dropped packages. Delete removes only what this stack built.
//
// Modules: where the cluster profile names modules (the conda frontend's, CUDA's) or the environment
// names its own (spec `modules`, loaded after the profile's), every command that runs the frontend or
// the environment goes through a login shell that loads them first (module-shell.ts): the build,
// the checks, `pulumi refresh`. The environment's own are part of its spec (environmentYml), so a
// change of them rebuilds it. Before anything on the target changes, a check loads them and finds the
// frontend, so a missing module stops `up` with the module system's own message and nothing built.
import type * as pulumi from '@pulumi/pulumi';
import type { EnvironmentFrontend } from '@kdgat/config';
import { changedKeys, sha256, siteExecutor, targetKey } from './common.ts';
import { packageText, ymlFromDisplay } from './environment-spec.ts';
import { runChecked, type Connection, type Executor } from '@kdgat/transport';
import { frontendFiles, frontendFor, type FrontendTarget } from './frontends/index.ts';
import { checkFrontend, withModules, type SiteModules } from './module-shell.ts';
import { pathExists, readFile, removeFile, removeTree, writeFile } from './target-fs.ts';

export interface EnvironmentInputs {
  connection: Connection;
  /** `<project>/<stack>`: written into the ownership marker. */
  owner: string;
  name: string;
  backend: 'conda' | 'venv';
  /** Tool that builds the environment (frontends/): `pip` for venv. */
  frontend: EnvironmentFrontend;
  /** Executable of the frontend on the target: conda/mamba/micromamba binary, or the Python that runs it (rattler, venv). */
  frontendCommand: string;
  prefix: string;
  /** Canonical environment.yml text behind a display header (environment-spec.ts): previews diff it line by line. */
  environmentYml: string;
  specHash: string;
  /**
   * Variables the solve runs with, from the frontend (`CONDA_OVERRIDE_CUDA` where the spec targets
   * a CUDA version). Absent in state written before it existed, which means none.
   */
  solveEnvironment?: Record<string, string>;
  /** Extra pip arguments for the venv backend (e.g. `--no-index --find-links DIR`). */
  pipOptions: string[];
  /**
   * venv only: prefixes of existing venvs (same Python version) whose site-packages are layered
   * under this one with a .pth file, e.g. the repository's `python/.venv` for the local stack.
   */
  inheritEnvironments: string[];
  specPath: string;
  lockPath: string;
  adopt: boolean;
  timeoutSeconds: number;
  /**
   * The cluster profile's name and modules (`conda`, `cuda`, `init`). Absent in state written before
   * modules were loaded, which means none.
   */
  profile?: string;
  modules?: SiteModules;
  /**
   * The environment's own site modules (its spec's `modules`), loaded after the profile's. Absent in
   * state written before they existed, which means none.
   */
  environmentModules?: string[];
}

export interface EnvironmentOutputs extends EnvironmentInputs {
  /** Explicit lock (`conda list --explicit --md5` form, or `pip freeze` for venv). */
  lock: string;
  lockHash: string;
  /** Packages found in the environment when it was last built (`name=version` lines). */
  builtPackages: string;
  /** Packages found in the environment now (refreshed by `pulumi refresh`; a hand-made change shows as a line). */
  installedPackages: string;
  adopted: boolean;
}

interface OwnerMarker {
  owner: string;
  adopted: boolean;
  state: 'building' | 'ready';
  specHash: string;
}

const markerPath = (prefix: string) => `${prefix}.kdgat-owner.json`;

async function readMarker(ex: Executor, prefix: string): Promise<OwnerMarker | null> {
  const text = await readFile(ex, markerPath(prefix));
  if (text === null) return null;
  try {
    return JSON.parse(text) as OwnerMarker;
  } catch {
    return null;
  }
}

async function writeMarker(ex: Executor, prefix: string, marker: OwnerMarker): Promise<void> {
  await writeFile(ex, markerPath(prefix), `${JSON.stringify(marker, null, 2)}\n`, '0644');
}

/** The target as the frontends use it: commands after the profile's modules are loaded, files written 0644. */
function frontendTarget(ex: Executor, env: EnvironmentInputs): FrontendTarget {
  return {
    run: (argv, options) => runChecked(ex, withModules(env, argv), options),
    write: (path, text) => writeFile(ex, path, text, '0644'),
  };
}

/** Live packages as sorted `name=version` lines. */
async function listInstalled(ex: Executor, env: EnvironmentInputs): Promise<string> {
  return packageText(await frontendFor(env.frontend).list(frontendTarget(ex, env), env));
}

/** Creates or rebuilds the environment to the spec: pick the frontend, plan, then run. Ownership is checked first. */
async function converge(env: EnvironmentInputs): Promise<EnvironmentOutputs> {
  const frontend = frontendFor(env.frontend);
  // What the frontend installs, refused here (before the target changes) when it cannot.
  const plan = frontend.plan(env);
  const ex = siteExecutor(env.connection);
  const exists = await pathExists(ex, env.prefix);
  const marker = await readMarker(ex, env.prefix);
  const ours = marker?.owner === env.owner;
  if (exists && !ours && !env.adopt) {
    throw new Error(
      `environment '${env.name}' already exists at ${env.prefix} on ${ex.target} and was not created by stack ${env.owner}` +
        `${marker ? ` (its marker names ${marker.owner})` : ' (no ownership marker)'}. ` +
        `Set adopt: true in the environment spec to let this stack take it over (it is rebuilt to the spec and kept on destroy), ` +
        `or remove it, or choose another name.`,
    );
  }
  // Modules and frontend first: a missing module refuses here, before the target changes.
  await checkFrontend(ex, env);
  const adopted = ours ? marker.adopted : exists;
  // The marker goes down before the build so an interrupted build is recognised as ours next time.
  await writeMarker(ex, env.prefix, { owner: env.owner, adopted, state: 'building', specHash: env.specHash });
  if (exists) await removeTree(ex, env.prefix);
  await writeFile(ex, env.specPath, ymlFromDisplay(env.environmentYml), '0644');
  const target = frontendTarget(ex, env);
  await frontend.build(target, env, plan);
  const lock = await frontend.lock(target, env);
  await writeFile(ex, env.lockPath, lock, '0644');
  const installed = packageText(await frontend.list(target, env));
  await writeMarker(ex, env.prefix, { owner: env.owner, adopted, state: 'ready', specHash: env.specHash });
  return {
    ...env,
    lock,
    lockHash: sha256(lock),
    builtPackages: installed,
    installedPackages: installed,
    adopted,
  };
}

const SPEC_KEYS = [
  'environmentYml',
  'solveEnvironment',
  'pipOptions',
  'inheritEnvironments',
  'frontend',
  'frontendCommand',
  'specPath',
  'lockPath',
  // The environment's own modules: the interpreter it is built with (also in environmentYml).
  'environmentModules',
] as const;

/** What needs a rebuild: the spec or how it is built changed, or packages drifted by hand since the last build. */
function rebuildReasons(olds: EnvironmentOutputs, news: EnvironmentInputs): string[] {
  // State from before solveEnvironment (or the environment's own modules) existed has none.
  const solve = (e: EnvironmentInputs) => ({
    ...e,
    solveEnvironment: e.solveEnvironment ?? {},
    environmentModules: e.environmentModules ?? [],
  });
  const changed = changedKeys(solve(olds) as never, solve(news) as never, SPEC_KEYS);
  if (olds.installedPackages !== olds.builtPackages) changed.push('installedPackages');
  return changed;
}

export async function diff(
  _id: string,
  olds: EnvironmentOutputs,
  news: EnvironmentInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const replaces = changedKeys(olds as never, news as never, ['prefix', 'name', 'backend']);
  if (targetKey(olds.connection) !== targetKey(news.connection)) replaces.push('connection');
  const changed = rebuildReasons(olds, news);
  // A new host key or private key for the same machine: an update that only records it.
  const connectionOnly = changedKeys(olds as never, news as never, ['connection', 'adopt', 'owner']);
  // So do other modules: the environment is the spec's, they only provide the tools (re-checked by
  // the update). State from before modules were loaded has none.
  if (JSON.stringify(olds.modules ?? {}) !== JSON.stringify(news.modules ?? {}))
    connectionOnly.push('modules');
  return {
    changes: replaces.length + changed.length + connectionOnly.length > 0,
    replaces,
    deleteBeforeReplace: true,
  };
}

export async function create(inputs: EnvironmentInputs): Promise<{ id: string; outs: EnvironmentOutputs }> {
  return { id: `${targetKey(inputs.connection)}:${inputs.prefix}`, outs: await converge(inputs) };
}

export async function update(
  _id: string,
  olds: EnvironmentOutputs,
  news: EnvironmentInputs,
): Promise<{ outs: EnvironmentOutputs }> {
  if (rebuildReasons(olds, news).length === 0) {
    // Only the connection, modules or adopt flag changed: check the frontend still loads and reaches
    // the environment, keep the build.
    const ex = siteExecutor(news.connection);
    await checkFrontend(ex, news);
    const installedPackages = await listInstalled(ex, news);
    return { outs: { ...olds, ...news, installedPackages } };
  }
  const outs = await converge(news);
  const ex = siteExecutor(news.connection);
  if (olds.lockPath !== news.lockPath) await removeFile(ex, olds.lockPath);
  if (olds.specPath !== news.specPath) await removeFile(ex, olds.specPath);
  return { outs };
}

/** The live environment: its package list, so hand-made changes show as drift. */
export async function read(
  id: string,
  props: EnvironmentOutputs,
): Promise<{ id: string; props: EnvironmentOutputs }> {
  const ex = siteExecutor(props.connection);
  if (!(await pathExists(ex, props.prefix))) return { id: '', props: {} as EnvironmentOutputs };
  const installed = await listInstalled(ex, props);
  return { id, props: { ...props, installedPackages: installed } };
}

export async function remove(_id: string, props: EnvironmentOutputs): Promise<void> {
  const ex = siteExecutor(props.connection);
  const marker = await readMarker(ex, props.prefix);
  if (marker?.owner !== props.owner) return; // not ours (any more): leave it alone
  if (!marker.adopted) await removeTree(ex, props.prefix);
  for (const path of [props.specPath, props.lockPath, ...frontendFiles(props.specPath)]) {
    await removeFile(ex, path);
  }
  await removeFile(ex, markerPath(props.prefix));
}
