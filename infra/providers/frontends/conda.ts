// conda and mamba (the cluster's frontends; mamba takes conda's commands): the environment from
// the spec file (`env create --prefix … --file environment.yml`, `- pip:` entries included), the
// lock from `list --explicit --md5`, the package list from `list --json`.
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

/** `<cli> list --explicit --md5 --prefix P`: conda, mamba and micromamba print the same form. */
export function condaLock(t: FrontendTarget, env: EnvironmentInputs): Promise<string> {
  return t.run([env.frontendCommand, 'list', '--explicit', '--md5', '--prefix', env.prefix], {
    timeoutSeconds: QUERY_TIMEOUT_SECONDS,
    what: lockWhat(env),
  });
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
