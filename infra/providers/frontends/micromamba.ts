// micromamba: `create --prefix … --file environment.yml` (it has no `env create`); lock and package
// list as conda's.
import { buildWhat, condaCudaOverride, withSolveEnvironment, type Frontend } from './frontend.ts';
import { condaList, condaLock, specFilePlan } from './conda.ts';

export const micromamba: Frontend = {
  name: 'micromamba',
  backend: 'conda',
  solveEnvironment: condaCudaOverride,
  plan: specFilePlan,
  async build(t, env) {
    const argv = [env.frontendCommand, 'create', '--yes', '--prefix', env.prefix, '--file', env.specPath];
    await t.run(withSolveEnvironment(env, argv), {
      timeoutSeconds: env.timeoutSeconds,
      what: buildWhat(env),
    });
  },
  lock: condaLock,
  list: condaList,
  files: () => [],
};
