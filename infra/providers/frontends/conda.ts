// conda and mamba (the cluster's frontends; mamba takes conda's commands): the environment from
// the spec file (`env create --prefix … --file environment.yml`, `- pip:` entries included), the
// lock from `list --explicit --md5` (plus the pip packages, which it leaves out), the package list
// from `list --json`.
import { specPackages, ymlFromDisplay } from '../environment-spec.ts';
import type { EnvironmentInputs } from '../environment.impl.ts';
import {
  QUERY_TIMEOUT_SECONDS,
  buildWhat,
  condaCudaOverride,
  listWhat,
  lockWhat,
  withSolveEnvironment,
  type Frontend,
  type FrontendPlan,
  type FrontendTarget,
  type PackageEntry,
} from './frontend.ts';

/** What a spec-file frontend installs: the spec's conda packages (and its `- pip:` entries, which it reads from the file itself). */
export function specFilePlan(env: EnvironmentInputs): FrontendPlan {
  const spec = specPackages(ymlFromDisplay(env.environmentYml));
  return { channels: spec.channels, specs: spec.conda };
}

/** Marks a pip package in an explicit lock: a comment to conda, a package to `lockPackages` (@kdgat/config). */
export const PIP_LOCK_PREFIX = '# pip ';

/**
 * `<cli> list --explicit --md5 --prefix P` (conda, mamba and micromamba print the same form). An
 * explicit lock leaves out what pip installed, so where the spec has `- pip:` entries (the
 * pipeline's pins and the GPU layer, docs/decisions/0006) the environment's pip packages follow as
 * `# pip name==version` lines: a run's lock then changes when uv.lock does.
 */
export async function condaLock(t: FrontendTarget, env: EnvironmentInputs): Promise<string> {
  const explicit = await t.run([env.frontendCommand, 'list', '--explicit', '--md5', '--prefix', env.prefix], {
    timeoutSeconds: QUERY_TIMEOUT_SECONDS,
    what: lockWhat(env),
  });
  if (specPackages(ymlFromDisplay(env.environmentYml)).pip.length === 0) return explicit;
  const listed = await t.run(
    [`${env.prefix}/bin/python`, '-m', 'pip', 'list', '--format=freeze', '--disable-pip-version-check'],
    { timeoutSeconds: QUERY_TIMEOUT_SECONDS, what: lockWhat(env) },
  );
  const pins = listed
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => /^[A-Za-z0-9][A-Za-z0-9._-]*==\S+$/.test(l))
    .sort();
  return [
    explicit.replace(/\n*$/, ''),
    '# pip packages of the environment (pip list --format=freeze):',
    ...pins.map((p) => `${PIP_LOCK_PREFIX}${p}`),
    '',
  ].join('\n');
}

/** `<cli> list --json --prefix P`. */
export async function condaList(t: FrontendTarget, env: EnvironmentInputs): Promise<PackageEntry[]> {
  const out = await t.run([env.frontendCommand, 'list', '--json', '--prefix', env.prefix], {
    timeoutSeconds: QUERY_TIMEOUT_SECONDS,
    what: listWhat(env),
  });
  return JSON.parse(out) as PackageEntry[];
}

function condaCli(name: 'conda' | 'mamba'): Frontend {
  return {
    name,
    backend: 'conda',
    solveEnvironment: condaCudaOverride,
    plan: specFilePlan,
    async build(t, env) {
      const argv = [
        env.frontendCommand,
        'env',
        'create',
        '--yes',
        '--prefix',
        env.prefix,
        '--file',
        env.specPath,
      ];
      await t.run(withSolveEnvironment(env, argv), {
        timeoutSeconds: env.timeoutSeconds,
        what: buildWhat(env),
      });
    },
    lock: condaLock,
    list: condaList,
    files: () => [],
  };
}

export const conda = condaCli('conda');
export const mamba = condaCli('mamba');
