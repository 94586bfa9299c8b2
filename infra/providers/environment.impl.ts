// A Python environment on the target (conda-family or venv), built from a canonical spec.
//
// Ownership: before building, the provider writes `<prefix>.kdgat-owner.json` naming the stack.
// A prefix that exists without this stack's marker is refused unless `adopt` is set; a half-built
// prefix that carries the marker (an interrupted `up`) is ours and is rebuilt on the next `up`.
// Updates rebuild the environment from scratch, because `conda env update --prune` does not
// reliably remove dropped packages. Delete removes only what this stack built.
//
// Modules: where the cluster profile names modules (the conda frontend's, CUDA's), every command that
// runs the frontend or the environment goes through a login shell that loads them first
// (module-shell.ts). Before anything on the target changes, a check loads them and finds the
// frontend, so a missing module stops `up` with the module system's own message and nothing built.
import { readFileSync } from 'node:fs';
import type * as pulumi from '@pulumi/pulumi';
import { changedKeys, connect, sha256, targetKey } from './common.ts';
import { packageText, specPackages, ymlFromDisplay } from './environment-spec.ts';
import { runChecked, type Connection, type Executor, type RunOptions } from './executor.ts';
import { checkFrontend, withModules, type SiteModules } from './module-shell.ts';
import { pathExists, readFile, removeFile, removeTree, writeFile } from './target-fs.ts';

export type Frontend = 'conda' | 'mamba' | 'micromamba' | 'rattler' | 'pip';

export interface EnvironmentInputs {
  connection: Connection;
  /** `<project>/<stack>`: written into the ownership marker. */
  owner: string;
  name: string;
  backend: 'conda' | 'venv';
  /** Tool that builds the environment; `pip` for venv. */
  frontend: Frontend;
  /** Executable of the frontend on the target: conda/mamba/micromamba binary, or the Python that runs it (rattler, venv). */
  frontendCommand: string;
  prefix: string;
  /** Canonical environment.yml text behind a display header (environment-spec.ts): previews diff it line by line. */
  environmentYml: string;
  specHash: string;
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
const rattlerHelperPath = (specPath: string) => `${specPath.replace(/[^/]*$/, '')}.kdgat-rattler_env.py`;
const requirementsPath = (specPath: string) =>
  specPath.replace(/(\.environment)?\.ya?ml$/, '') + '.requirements.txt';

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

function rattlerHelperText(): string {
  return readFileSync(new URL('./rattler_env.py', import.meta.url), 'utf8');
}

/** Package lines of the spec for frontends that take lists (venv: pip lines, rattler: conda specs). */
function packagesFor(env: EnvironmentInputs): { channels: string[]; specs: string[] } {
  const spec = specPackages(ymlFromDisplay(env.environmentYml));
  if (env.frontend === 'pip') {
    // A venv gets everything but the interpreter itself: pip lines and plain top-level names.
    const plain = spec.conda.filter((d) => !/^(python|pip)([<>=!~ ]|$)/.test(d));
    return { channels: [], specs: [...plain, ...spec.pip] };
  }
  if (spec.pip.length > 0) {
    throw new Error(
      `environment '${env.name}': frontend '${env.frontend}' cannot install the pip: entries ${JSON.stringify(spec.pip)}; ` +
        `use frontend conda, mamba or micromamba, or move them to conda packages`,
    );
  }
  return { channels: spec.channels, specs: spec.conda };
}

/** Runs a command of the frontend or the environment, after the profile's modules are loaded. */
function runInEnv(
  ex: Executor,
  env: EnvironmentInputs,
  argv: readonly string[],
  options: RunOptions & { what?: string },
): Promise<string> {
  return runChecked(ex, withModules(env, argv), options);
}

async function build(ex: Executor, env: EnvironmentInputs): Promise<void> {
  const bound = { timeoutSeconds: env.timeoutSeconds };
  const what = `building environment '${env.name}' at ${env.prefix}`;
  const packages = packagesFor(env);
  switch (env.frontend) {
    case 'pip': {
      await runInEnv(ex, env, [env.frontendCommand, '-m', 'venv', env.prefix], { ...bound, what });
      if (env.inheritEnvironments.length > 0) {
        const purelib = async (prefix: string) =>
          (
            await runInEnv(
              ex,
              env,
              [`${prefix}/bin/python`, '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'],
              {
                ...bound,
                what: `finding the site-packages of ${prefix}`,
              },
            )
          ).trim();
        const inherited: string[] = [];
        for (const prefix of env.inheritEnvironments) inherited.push(await purelib(prefix));
        // addsitedir (not a bare path line) so the inherited environment's own .pth files run too,
        // e.g. the editable install of the kdgat package that uv makes in python/.venv.
        const lines = inherited.map((dir) => `import site; site.addsitedir(${JSON.stringify(dir)})`);
        await writeFile(
          ex,
          `${await purelib(env.prefix)}/kdgat-inherit.pth`,
          `${lines.join('\n')}\n`,
          '0644',
        );
      }
      if (packages.specs.length > 0) {
        const reqs = requirementsPath(env.specPath);
        await writeFile(ex, reqs, `${packages.specs.join('\n')}\n`, '0644');
        await runInEnv(
          ex,
          env,
          [
            `${env.prefix}/bin/python`,
            '-m',
            'pip',
            'install',
            '--disable-pip-version-check',
            '--no-input',
            ...env.pipOptions,
            '-r',
            reqs,
          ],
          { ...bound, what },
        );
      }
      return;
    }
    case 'rattler': {
      const helper = rattlerHelperPath(env.specPath);
      await writeFile(ex, helper, rattlerHelperText(), '0644');
      const request = JSON.stringify(packages);
      await runInEnv(ex, env, [env.frontendCommand, helper, 'create', '--prefix', env.prefix], {
        ...bound,
        input: request,
        what,
      });
      return;
    }
    case 'micromamba':
      await runInEnv(
        ex,
        env,
        [env.frontendCommand, 'create', '--yes', '--prefix', env.prefix, '--file', env.specPath],
        { ...bound, what },
      );
      return;
    case 'conda':
    case 'mamba':
      await runInEnv(
        ex,
        env,
        [env.frontendCommand, 'env', 'create', '--yes', '--prefix', env.prefix, '--file', env.specPath],
        {
          ...bound,
          what,
        },
      );
      return;
  }
}

/** The explicit lock of the built environment. */
async function exportLock(ex: Executor, env: EnvironmentInputs): Promise<string> {
  const bound = { timeoutSeconds: 600, what: `exporting the lock of '${env.name}'` };
  switch (env.frontend) {
    case 'pip':
      return runInEnv(
        ex,
        env,
        [`${env.prefix}/bin/python`, '-m', 'pip', 'freeze', '--all', '--disable-pip-version-check'],
        bound,
      );
    case 'rattler':
      return runInEnv(
        ex,
        env,
        [env.frontendCommand, rattlerHelperPath(env.specPath), 'lock', '--prefix', env.prefix],
        bound,
      );
    default:
      return runInEnv(
        ex,
        env,
        [env.frontendCommand, 'list', '--explicit', '--md5', '--prefix', env.prefix],
        bound,
      );
  }
}

/** Live packages as sorted `name=version` lines. */
export async function listInstalled(ex: Executor, env: EnvironmentInputs): Promise<string> {
  const bound = { timeoutSeconds: 600, what: `listing the packages of '${env.name}'` };
  let entries: { name: string; version: string }[];
  switch (env.frontend) {
    case 'pip':
      entries = JSON.parse(
        await runInEnv(
          ex,
          env,
          [`${env.prefix}/bin/python`, '-m', 'pip', 'list', '--format=json', '--disable-pip-version-check'],
          bound,
        ),
      );
      break;
    case 'rattler':
      entries = JSON.parse(
        await runInEnv(
          ex,
          env,
          [env.frontendCommand, rattlerHelperPath(env.specPath), 'list', '--prefix', env.prefix],
          bound,
        ),
      );
      break;
    default:
      entries = JSON.parse(
        await runInEnv(ex, env, [env.frontendCommand, 'list', '--json', '--prefix', env.prefix], bound),
      );
  }
  return packageText(entries);
}

/** Creates or rebuilds the environment to the spec; the ownership rule is checked first. */
async function converge(env: EnvironmentInputs): Promise<EnvironmentOutputs> {
  const ex = connect(env.connection);
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
  await build(ex, env);
  const lock = await exportLock(ex, env);
  await writeFile(ex, env.lockPath, lock, '0644');
  const installed = await listInstalled(ex, env);
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
  'pipOptions',
  'inheritEnvironments',
  'frontend',
  'frontendCommand',
  'specPath',
  'lockPath',
] as const;

/** What needs a rebuild: the spec or how it is built changed, or packages drifted by hand since the last build. */
function rebuildReasons(olds: EnvironmentOutputs, news: EnvironmentInputs): string[] {
  const changed = changedKeys(olds as never, news as never, SPEC_KEYS);
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
    const ex = connect(news.connection);
    await checkFrontend(ex, news);
    const installedPackages = await listInstalled(ex, news);
    return { outs: { ...olds, ...news, installedPackages } };
  }
  const outs = await converge(news);
  const ex = connect(news.connection);
  if (olds.lockPath !== news.lockPath) await removeFile(ex, olds.lockPath);
  if (olds.specPath !== news.specPath) await removeFile(ex, olds.specPath);
  return { outs };
}

/** The live environment: its package list, so hand-made changes show as drift. */
export async function read(
  id: string,
  props: EnvironmentOutputs,
): Promise<{ id: string; props: EnvironmentOutputs }> {
  const ex = connect(props.connection);
  if (!(await pathExists(ex, props.prefix))) return { id: '', props: {} as EnvironmentOutputs };
  const installed = await listInstalled(ex, props);
  return { id, props: { ...props, installedPackages: installed } };
}

export async function remove(_id: string, props: EnvironmentOutputs): Promise<void> {
  const ex = connect(props.connection);
  const marker = await readMarker(ex, props.prefix);
  if (marker?.owner !== props.owner) return; // not ours (any more): leave it alone
  if (!marker.adopted) await removeTree(ex, props.prefix);
  for (const path of [
    props.specPath,
    props.lockPath,
    requirementsPath(props.specPath),
    rattlerHelperPath(props.specPath),
  ]) {
    await removeFile(ex, path);
  }
  await removeFile(ex, markerPath(props.prefix));
}
