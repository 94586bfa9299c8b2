// The venv backend (docs/decisions/0003): `<frontendCommand> -m venv <prefix>`, optionally layered
// over existing venvs (`inheritEnvironments`, a .pth file), then `pip install -r
// <name>.requirements.txt` with the stack's pipOptions; the lock is `pip freeze --all`.
import { specPackages, ymlFromDisplay } from '../environment-spec.ts';
import type { EnvironmentInputs } from '../environment.impl.ts';
import {
  QUERY_TIMEOUT_SECONDS,
  buildWhat,
  listWhat,
  lockWhat,
  type Frontend,
  type FrontendTarget,
  type PackageEntry,
} from './frontend.ts';

const requirementsPath = (specPath: string) =>
  specPath.replace(/(\.environment)?\.ya?ml$/, '') + '.requirements.txt';

/** site-packages of the venv at `prefix`. */
async function purelib(t: FrontendTarget, env: EnvironmentInputs, prefix: string): Promise<string> {
  const out = await t.run(
    [`${prefix}/bin/python`, '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'],
    { timeoutSeconds: env.timeoutSeconds, what: `finding the site-packages of ${prefix}` },
  );
  return out.trim();
}

export const pip: Frontend = {
  name: 'pip',
  backend: 'venv',
  solveEnvironment: () => ({}),
  plan(env) {
    // A venv gets everything but the interpreter itself: pip lines and plain top-level names.
    const spec = specPackages(ymlFromDisplay(env.environmentYml));
    const plain = spec.conda.filter((d) => !/^(python|pip)([<>=!~ ]|$)/.test(d));
    return { channels: [], specs: [...plain, ...spec.pip] };
  },
  async build(t, env, plan) {
    const what = buildWhat(env);
    await t.run([env.frontendCommand, '-m', 'venv', env.prefix], {
      timeoutSeconds: env.timeoutSeconds,
      what,
    });
    if (env.inheritEnvironments.length > 0) {
      // A venv of Python 3.11 gets ensurepip's own setuptools, which would hide the inherited one
      // (the lock's pin) and send pip to an index for it. Removed before the layers are added, so
      // only this venv's copy can be seen (pip never uninstalls outside the environment anyway).
      await t.run(
        [
          `${env.prefix}/bin/python`,
          '-m',
          'pip',
          'uninstall',
          '--yes',
          '--disable-pip-version-check',
          'setuptools',
        ],
        { timeoutSeconds: env.timeoutSeconds, what },
      );
      const inherited: string[] = [];
      for (const prefix of env.inheritEnvironments) inherited.push(await purelib(t, env, prefix));
      // addsitedir (not a bare path line) so the inherited environment's own .pth files run too,
      // e.g. the editable install of the default pipeline that uv makes in python/.venv.
      const lines = inherited.map((dir) => `import site; site.addsitedir(${JSON.stringify(dir)})`);
      await t.write(`${await purelib(t, env, env.prefix)}/kdgat-inherit.pth`, `${lines.join('\n')}\n`);
    }
    if (plan.specs.length === 0) return;
    const reqs = requirementsPath(env.specPath);
    await t.write(reqs, `${plan.specs.join('\n')}\n`);
    await t.run(
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
      { timeoutSeconds: env.timeoutSeconds, what },
    );
  },
  lock: (t, env) =>
    t.run([`${env.prefix}/bin/python`, '-m', 'pip', 'freeze', '--all', '--disable-pip-version-check'], {
      timeoutSeconds: QUERY_TIMEOUT_SECONDS,
      what: lockWhat(env),
    }),
  async list(t, env) {
    const out = await t.run(
      [`${env.prefix}/bin/python`, '-m', 'pip', 'list', '--format=json', '--disable-pip-version-check'],
      { timeoutSeconds: QUERY_TIMEOUT_SECONDS, what: listWhat(env) },
    );
    return JSON.parse(out) as PackageEntry[];
  },
  files: (specPath) => [requirementsPath(specPath)],
};
