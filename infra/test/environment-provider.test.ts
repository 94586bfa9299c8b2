// The environment provider's rules that need no build: ownership, and what counts as a change.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import * as env from '../providers/environment.impl.ts';
import { specPackages, ymlForDisplay, ymlFromDisplay } from '../providers/environment-spec.ts';
import { ENVIRONMENT_FRONTENDS, lockPackages } from '@kdgat/config';
import { frontendFor, type FrontendTarget } from '../providers/frontends/index.ts';
import { withSolveEnvironment } from '../providers/frontends/frontend.ts';
import { withModules } from '../providers/module-shell.ts';

function inputs(root: string): env.EnvironmentInputs {
  return {
    connection: { kind: 'local' },
    owner: 'kdgat-hpc/test',
    name: 'gnn-rapids',
    backend: 'conda',
    frontend: 'rattler',
    frontendCommand: 'python3',
    prefix: join(root, 'envs', 'gnn-rapids'),
    environmentYml: ymlForDisplay(
      'name: gnn-rapids\nchannels:\n  - conda-forge\ndependencies:\n  - pytorch=2.7\n',
    ),
    specHash: 'abc',
    pipOptions: [],
    inheritEnvironments: [],
    specPath: join(root, 'envs', 'gnn-rapids.environment.yml'),
    lockPath: join(root, 'envs', 'gnn-rapids.lock.txt'),
    adopt: false,
    timeoutSeconds: 60,
  };
}

function outputs(i: env.EnvironmentInputs): env.EnvironmentOutputs {
  const pkgs = 'python=3.12.1\npytorch=2.7.0\n';
  return {
    ...i,
    lock: '@EXPLICIT\n',
    lockHash: 'h',
    builtPackages: pkgs,
    installedPackages: pkgs,
    adopted: false,
  };
}

describe('environment ownership', () => {
  it('refuses an existing environment this stack did not create, naming it and the way out', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-env-'));
    const i = inputs(root);
    mkdirSync(join(i.prefix, 'conda-meta'), { recursive: true });
    await expect(env.create(i)).rejects.toThrow(
      new RegExp(
        `environment 'gnn-rapids' already exists at ${i.prefix} on local and was not created by stack kdgat-hpc/test \\(no ownership marker\\)\\. Set adopt: true`,
      ),
    );
    // nothing was touched
    expect(readdirSync(i.prefix)).toEqual(['conda-meta']);
    expect(readdirSync(join(root, 'envs'))).toEqual(['gnn-rapids']);
  });
});

describe('frontend check before anything changes', () => {
  it('refuses a frontend that is not on PATH, naming it, and leaves the target untouched', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-env-'));
    const i = { ...inputs(root), frontendCommand: 'kdgat-no-such-frontend' };
    await expect(env.create(i)).rejects.toThrow(
      /environment 'gnn-rapids': the frontend command 'kdgat-no-such-frontend' is not on PATH on local; nothing was changed\.\nSet build\.frontendCommand/,
    );
    expect(readdirSync(root)).toEqual([]);
  });
});

describe('frontends', () => {
  it('are chosen by name; pip builds the venv backend, the others conda', () => {
    for (const name of ENVIRONMENT_FRONTENDS) {
      expect(frontendFor(name).name).toBe(name);
      expect(frontendFor(name).backend).toBe(name === 'pip' ? 'venv' : 'conda');
    }
    expect(() => frontendFor('spack' as never)).toThrow(/unknown environment frontend 'spack'/);
  });

  it("tell every conda solver the spec's CUDA (CONDA_OVERRIDE_CUDA), none without one, pip never", () => {
    for (const name of ['conda', 'mamba', 'micromamba', 'rattler'] as const) {
      expect(frontendFor(name).solveEnvironment('12.4')).toEqual({ CONDA_OVERRIDE_CUDA: '12.4' });
      expect(frontendFor(name).solveEnvironment(undefined)).toEqual({});
    }
    expect(frontendFor('pip').solveEnvironment('12.4')).toEqual({});
    const i = inputs('/s');
    expect(
      withSolveEnvironment({ ...i, solveEnvironment: { CONDA_OVERRIDE_CUDA: '12.4' } }, ['conda', 'env']),
    ).toEqual(['env', 'CONDA_OVERRIDE_CUDA=12.4', 'conda', 'env']);
    expect(withSolveEnvironment(i, ['conda', 'env'])).toEqual(['conda', 'env']);
  });

  it('plan what they install: a venv drops the interpreter, conda frontends keep the conda packages', () => {
    const yml = ymlForDisplay(
      'name: e\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.12\n  - pytorch=2.8\n  - pip:\n      - optuna==4.1.0\n',
    );
    const i = { ...inputs('/s'), environmentYml: yml };
    expect(frontendFor('pip').plan(i)).toEqual({ channels: [], specs: ['pytorch=2.8', 'optuna==4.1.0'] });
    expect(frontendFor('conda').plan(i)).toEqual({
      channels: ['conda-forge'],
      specs: ['python=3.12', 'pytorch=2.8'],
    });
  });

  it('refuse what they cannot install before the target changes (rattler and pip: entries)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-env-'));
    const i = inputs(root);
    const yml = ymlForDisplay(
      'name: e\nchannels:\n  - conda-forge\ndependencies:\n  - pytorch=2.8\n  - pip:\n      - optuna==4.1.0\n',
    );
    await expect(env.create({ ...i, environmentYml: yml })).rejects.toThrow(
      /environment 'gnn-rapids': frontend 'rattler' cannot install the pip: entries \["optuna==4\.1\.0"\]/,
    );
    expect(readdirSync(root)).toEqual([]);
  });
});

describe('the lock of a conda environment with a pip part', () => {
  const EXPLICIT =
    '# platform: linux-64\n@EXPLICIT\nhttps://conda.anaconda.org/conda-forge/linux-64/python-3.12.8-h_0.conda#aa\n';
  function target(freeze: string): { t: FrontendTarget; calls: string[][] } {
    const calls: string[][] = [];
    return {
      calls,
      t: {
        run: async (argv) => {
          calls.push([...argv]);
          return argv.includes('--explicit') ? EXPLICIT : freeze;
        },
        write: async () => undefined,
      },
    };
  }

  it('adds what pip installed as `# pip name==version` lines, which lockPackages reads', async () => {
    const yml = ymlForDisplay(
      'name: e\nchannels:\n  - conda-forge\ndependencies:\n  - pip\n  - python=3.12\n  - pip:\n      - psutil==7.2.2\n      - torch==2.9.1\n',
    );
    const i = { ...inputs('/s'), frontend: 'conda' as const, frontendCommand: 'conda', environmentYml: yml };
    const { t, calls } = target('torch==2.9.1\npsutil==7.2.2\npip==25.3\n');
    const lock = await frontendFor('conda').lock(t, i);
    expect(calls).toEqual([
      ['conda', 'list', '--explicit', '--md5', '--prefix', '/s/envs/gnn-rapids'],
      [
        '/s/envs/gnn-rapids/bin/python',
        '-m',
        'pip',
        'list',
        '--format=freeze',
        '--disable-pip-version-check',
      ],
    ]);
    expect(lock).toBe(
      `${EXPLICIT}# pip packages of the environment (pip list --format=freeze):\n# pip pip==25.3\n# pip psutil==7.2.2\n# pip torch==2.9.1\n`,
    );
    expect(lockPackages(lock).get('torch')).toBe('2.9.1');
    expect(lockPackages(lock).get('python')).toBe('3.12.8-h_0');
  });

  it('is the explicit lock alone where the spec has no pip: entries (micromamba too)', async () => {
    const { t, calls } = target('');
    const i = { ...inputs('/s'), frontend: 'micromamba' as const, frontendCommand: 'micromamba' };
    expect(await frontendFor('micromamba').lock(t, i)).toBe(EXPLICIT);
    expect(calls).toHaveLength(1);
  });
});

describe('commands with the profile modules', () => {
  it('run argv as given without modules, and through a login shell that loads them otherwise', () => {
    expect(withModules({ profile: 'local', modules: {} }, ['conda', 'list'])).toEqual(['conda', 'list']);
    const argv = withModules(
      { profile: 'osc-pitzer', modules: { conda: 'miniconda3/24.1.2-py310', cuda: 'cuda/12.4.1' } },
      ['conda', 'env', 'create', '--prefix', "/fs/ess/it's here"],
    );
    expect(argv.slice(0, 3)).toEqual(['bash', '-l', '-c']);
    // The profile's modules as values for environment.sh, loaded by one call before the command.
    expect(argv[3]).toContain('hpc_login_modules=(\n  miniconda3/24.1.2-py310 cuda/12.4.1\n)\n');
    expect(argv[3]).toMatch(/^hpc_load_login_modules\nexec "\$@"\n$/m);
    // The environment's own modules after the profile's; alone where the profile names none.
    const own = withModules(
      {
        profile: 'osc-pitzer',
        modules: { conda: 'miniconda3/24.1.2-py310' },
        environmentModules: ['python/3.12'],
      },
      ['python3', '-m', 'venv', '/fs/ess/envs/tiny'],
    );
    expect(own[3]).toContain('hpc_login_modules=(\n  miniconda3/24.1.2-py310 python/3.12\n)\n');
    const alone = withModules({ profile: 'local', modules: {}, environmentModules: ['python/3.12'] }, [
      'true',
    ]);
    expect(alone.slice(0, 3)).toEqual(['bash', '-l', '-c']);
    expect(alone[3]).toContain('hpc_login_modules=(\n  python/3.12\n)\n');
    expect(argv.slice(4)).toEqual([
      'kdgat-modules',
      'conda',
      'env',
      'create',
      '--prefix',
      "/fs/ess/it's here",
    ]);
  });
});

describe("an environment's own site modules (a venv that needs the site's Python module)", () => {
  /**
   * The site's `module` as a login shell has it: every command runs in `bash -l`, which reads the
   * user's ~/.bash_profile after the system's files, so a `module` defined there (recording each
   * call; failing for `*9.99`, as Lmod does for an unknown module) is the one used, whether or not
   * this machine has Lmod (whose init is re-read through BASH_ENV unless that is unset). HOME
   * points at it for the test.
   */
  function site(root: string) {
    const log = join(root, 'module-calls');
    const home = join(root, 'home');
    mkdirSync(home);
    writeFileSync(
      join(home, '.bash_profile'),
      'unset BASH_ENV\nmodule() {\n' +
        `  printf '%s\\n' "$*" >>'${log}'\n` +
        '  case $* in *9.99*) echo "Lmod has detected the following error: unknown module(s): $*" >&2; return 1 ;; esac\n' +
        '}\n',
    );
    const calls = () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []);
    return { init: join(root, 'no-lmod-init.sh'), calls, home };
  }
  let savedHome: string | undefined;
  const asUser = (home: string) => {
    savedHome = process.env['HOME'];
    process.env['HOME'] = home;
  };
  afterEach(() => {
    if (savedHome === undefined) delete process.env['HOME'];
    else process.env['HOME'] = savedHome;
    savedHome = undefined;
  });
  const venv = (root: string, init: string, environmentModules: string[]): env.EnvironmentInputs => ({
    ...inputs(root),
    name: 'tiny-venv',
    backend: 'venv',
    frontend: 'pip',
    frontendCommand: 'python3',
    prefix: join(root, 'envs', 'tiny-venv'),
    environmentYml: ymlForDisplay(
      `name: tiny-venv\ndependencies:\n  - python=3.12\n${environmentModules.map((m) => `#   - ${m}\n`).join('')}`,
    ),
    specPath: join(root, 'envs', 'tiny-venv.environment.yml'),
    lockPath: join(root, 'envs', 'tiny-venv.lock.txt'),
    profile: 'osc-pitzer',
    modules: { init },
    environmentModules,
  });

  it('loads them, after the profile modules, for every command of the build and of a refresh', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-env-modules-'));
    const lmod = site(root);
    asUser(lmod.home);
    const i = {
      ...venv(root, lmod.init, ['python/3.12', 'gcc/12.3.0']),
      modules: { init: lmod.init, cuda: 'cuda/12.4.1' },
    };
    const { outs } = await env.create(i);
    expect(existsSync(join(i.prefix, 'bin', 'activate'))).toBe(true);
    expect(outs.lock).toMatch(/^pip==/m);
    // The check, `-m venv`, the lock and the package list: each after the same modules, in order.
    expect(lmod.calls().length).toBeGreaterThanOrEqual(4);
    expect(new Set(lmod.calls())).toEqual(new Set(['load cuda/12.4.1 python/3.12 gcc/12.3.0']));
    const before = lmod.calls().length;
    await env.read('id', outs);
    expect(lmod.calls().slice(before)).toEqual(['load cuda/12.4.1 python/3.12 gcc/12.3.0']);
  }, 60_000);

  it('a change of them rebuilds the environment; a change of only the profile modules keeps it', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-env-modules-'));
    const lmod = site(root);
    asUser(lmod.home);
    const i = venv(root, lmod.init, ['python/3.11']);
    const { outs } = await env.create(i);
    const mark = join(i.prefix, 'built-by-the-first-build');
    writeFileSync(mark, '');
    // The profile's modules only provide the tools: re-checked, the build kept.
    const profileOnly = { ...i, modules: { init: lmod.init, cuda: 'cuda/12.4.1' } };
    expect((await env.diff('id', outs, profileOnly)).changes).toBe(true);
    const kept = (await env.update('id', outs, profileOnly)).outs;
    expect(existsSync(mark)).toBe(true);
    // The environment's own: the interpreter it is made from, so it is built again.
    const other = { ...venv(root, lmod.init, ['python/3.12']), modules: profileOnly.modules };
    expect(await env.diff('id', kept, other)).toMatchObject({ changes: true, replaces: [] });
    await env.update('id', kept, other);
    expect(existsSync(mark)).toBe(false);
    expect(lmod.calls().at(-1)).toBe('load cuda/12.4.1 python/3.12');
    // State written before the field existed, for an environment that names none: no change.
    const { environmentModules: _none, ...old } = outputs(inputs(root));
    expect((await env.diff('id', old, { ...inputs(root), environmentModules: [] })).changes).toBe(false);
  }, 60_000);

  it('a module that cannot be loaded refuses before anything is built, naming the environment and its modules', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-env-modules-'));
    const lmod = site(root);
    asUser(lmod.home);
    const i = venv(root, lmod.init, ['python/9.99']);
    await expect(env.create(i)).rejects.toThrow(
      /environment 'tiny-venv': the modules of cluster profile osc-pitzer and of the environment \(python\/9\.99\) could not be loaded on local; nothing was changed\.\n.*unknown module\(s\): load python\/9\.99/s,
    );
    expect(existsSync(i.prefix)).toBe(false);
  });
});

describe('environment diff', () => {
  const i = inputs('/scratch');
  const o = outputs(i);

  it('reports no change for the same spec', async () => {
    expect((await env.diff('id', o, i)).changes).toBe(false);
  });

  it('updates in place when the packages change', async () => {
    const yml = ymlForDisplay(
      'name: gnn-rapids\nchannels:\n  - conda-forge\ndependencies:\n  - cugraph=26.10\n  - pytorch=2.8\n',
    );
    const r = await env.diff('id', o, { ...i, environmentYml: yml });
    expect(r).toMatchObject({ changes: true, replaces: [] });
  });

  it('replaces when the prefix or the machine changes', async () => {
    expect((await env.diff('id', o, { ...i, prefix: '/other' })).replaces).toEqual(['prefix']);
    const ssh = { kind: 'ssh' as const, host: 'h', port: 22, user: 'u', hostKey: 'k' };
    expect((await env.diff('id', o, { ...i, connection: ssh })).replaces).toEqual(['connection']);
    // a new key for the same machine is not a new environment: an update that records it
    const withKey = { ...o, connection: { ...ssh, privateKey: 'old' } };
    expect(await env.diff('id', withKey, { ...i, connection: { ...ssh, privateKey: 'new' } })).toMatchObject({
      changes: true,
      replaces: [],
    });
  });

  it('re-checks without rebuilding when the modules change; none recorded equals none declared', async () => {
    const osc = { conda: 'miniconda3/24.1.2-py310', cuda: 'cuda/12.4.1' };
    const withModules = { ...o, profile: 'osc-pitzer', modules: osc };
    expect(
      await env.diff('id', withModules, {
        ...i,
        profile: 'osc-pitzer',
        modules: { ...osc, cuda: 'cuda/12.8.1' },
      }),
    ).toMatchObject({
      changes: true,
      replaces: [],
    });
    expect((await env.diff('id', withModules, { ...i, profile: 'osc-pitzer', modules: osc })).changes).toBe(
      false,
    );
    // state written before modules existed, read by this version for a profile without modules
    expect((await env.diff('id', o, { ...i, profile: 'local', modules: {} })).changes).toBe(false);
  });

  it("rebuilds when the solve's CUDA changes; none recorded equals none declared", async () => {
    const cuda = { ...o, solveEnvironment: { CONDA_OVERRIDE_CUDA: '12.4' } };
    expect(
      await env.diff('id', cuda, { ...i, solveEnvironment: { CONDA_OVERRIDE_CUDA: '12.8' } }),
    ).toMatchObject({
      changes: true,
      replaces: [],
    });
    expect(
      (await env.diff('id', o, { ...i, solveEnvironment: { CONDA_OVERRIDE_CUDA: '12.4' } })).changes,
    ).toBe(true);
    // state written before solveEnvironment existed, read for a spec without CUDA
    expect((await env.diff('id', o, { ...i, solveEnvironment: {} })).changes).toBe(false);
  });

  it('sees drift: a package installed by hand since the last build', async () => {
    const drifted = { ...o, installedPackages: `${o.installedPackages}requests=2.32.0\n` };
    expect((await env.diff('id', drifted, i)).changes).toBe(true);
  });
});

describe('environment spec text', () => {
  it('round-trips through the display form and yields the package lists', () => {
    const yml =
      'name: e\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.12\n  - pytorch=2.8\n  - pip:\n      - torch-geometric==2.8.0\n';
    expect(ymlFromDisplay(ymlForDisplay(yml))).toBe(yml);
    expect(specPackages(yml)).toEqual({
      channels: ['conda-forge'],
      conda: ['python=3.12', 'pytorch=2.8'],
      pip: ['torch-geometric==2.8.0'],
    });
  });
});
