// The environment provider's rules that need no build: ownership, and what counts as a change.
import { mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as env from '../providers/environment.impl.ts';
import { specPackages, ymlForDisplay, ymlFromDisplay } from '../providers/environment-spec.ts';
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

describe('commands with the profile modules', () => {
  it('run argv as given without modules, and through a login shell that loads them otherwise', () => {
    expect(withModules({ profile: 'local', modules: {} }, ['conda', 'list'])).toEqual(['conda', 'list']);
    const argv = withModules(
      { profile: 'osc-pitzer', modules: { conda: 'miniconda3/24.1.2-py310', cuda: 'cuda/12.4.1' } },
      ['conda', 'env', 'create', '--prefix', "/fs/ess/it's here"],
    );
    expect(argv.slice(0, 3)).toEqual(['bash', '-l', '-c']);
    expect(argv[3]).toContain('module load miniconda3/24.1.2-py310 cuda/12.4.1');
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
