// py-rattler (docs/decisions/0003): conda environments without a conda binary. rattler_env.py is
// copied beside the spec and run by `frontendCommand`, a Python that has py-rattler: it solves and
// installs the spec's conda packages (no `- pip:` entries), writes the `@EXPLICIT` lock and lists
// the packages. Its solve reads CONDA_OVERRIDE_CUDA as conda does.
import { readFileSync } from 'node:fs';
import { specPackages, ymlFromDisplay } from '../environment-spec.ts';
import {
  QUERY_TIMEOUT_SECONDS,
  buildWhat,
  condaCudaOverride,
  listWhat,
  lockWhat,
  withSolveEnvironment,
  type Frontend,
  type PackageEntry,
} from './frontend.ts';

const helperPath = (specPath: string) => `${specPath.replace(/[^/]*$/, '')}.kdgat-rattler_env.py`;

export const rattler: Frontend = {
  name: 'rattler',
  backend: 'conda',
  solveEnvironment: condaCudaOverride,
  plan(env) {
    const spec = specPackages(ymlFromDisplay(env.environmentYml));
    if (spec.pip.length > 0) {
      throw new Error(
        `environment '${env.name}': frontend 'rattler' cannot install the pip: entries ${JSON.stringify(spec.pip)}; ` +
          `use frontend conda, mamba or micromamba, or move them to conda packages`,
      );
    }
    return { channels: spec.channels, specs: spec.conda };
  },
  async build(t, env, plan) {
    const helper = helperPath(env.specPath);
    await t.write(helper, readFileSync(new URL('./rattler_env.py', import.meta.url), 'utf8'));
    const argv = [env.frontendCommand, helper, 'create', '--prefix', env.prefix];
    await t.run(withSolveEnvironment(env, argv), {
      timeoutSeconds: env.timeoutSeconds,
      input: JSON.stringify(plan),
      what: buildWhat(env),
    });
  },
  lock: (t, env) =>
    t.run([env.frontendCommand, helperPath(env.specPath), 'lock', '--prefix', env.prefix], {
      timeoutSeconds: QUERY_TIMEOUT_SECONDS,
      what: lockWhat(env),
    }),
  async list(t, env) {
    const out = await t.run([env.frontendCommand, helperPath(env.specPath), 'list', '--prefix', env.prefix], {
      timeoutSeconds: QUERY_TIMEOUT_SECONDS,
      what: listWhat(env),
    });
    return JSON.parse(out) as PackageEntry[];
  },
  files: (specPath) => [helperPath(specPath)],
};
