// The environment provider with real frontends: a venv built by pip from local wheels, and a conda
// environment solved and installed by py-rattler from a local channel. No Pulumi CLI involved.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { pipRequirements, type EnvironmentSpec } from '@kdgat/config';
import * as env from '../../providers/environment.impl.ts';
import { ymlForDisplay } from '../../providers/environment-spec.ts';
import { frontendFor } from '../../providers/frontends/index.ts';
import { makeCondaChannel, makeWheels, rattlerPython } from './tools.ts';

const local = { kind: 'local' as const };

/** environment.yml text (display form) of a spec. */
function yml(name: string, opts: { channels?: string[]; conda?: string[]; pip?: string[] }): string {
  const lines = [`name: ${name}`];
  if (opts.channels) lines.push('channels:', ...opts.channels.map((c) => `  - ${c}`));
  lines.push('dependencies:', ...(opts.conda ?? []).map((d) => `  - ${d}`));
  if (opts.pip) lines.push('  - pip:', ...opts.pip.map((p) => `      - ${p}`));
  return ymlForDisplay(`${lines.join('\n')}\n`);
}

function base(
  root: string,
  name: string,
): Omit<env.EnvironmentInputs, 'backend' | 'frontend' | 'frontendCommand' | 'environmentYml' | 'pipOptions'> {
  return {
    connection: local,
    owner: 'kdgat-hpc/e2e',
    name,
    prefix: join(root, 'envs', name),
    specHash: 'h1',
    inheritEnvironments: [],
    specPath: join(root, 'envs', `${name}.environment.yml`),
    lockPath: join(root, 'envs', `${name}.lock.txt`),
    adopt: false,
    timeoutSeconds: 300,
  };
}

describe('venv backend (pip from local wheels)', () => {
  let root: string;
  let wheels: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'kdgat-venv-'));
    wheels = makeWheels(join(root, 'wheels'), ['alpha==1.0', 'alpha==2.0', 'beta==0.1', 'gamma==3.0']);
  });

  it('creates, rebuilds on a spec change, sees a hand-installed package, and removes only its own env', async () => {
    const inputs: env.EnvironmentInputs = {
      ...base(root, 'cpu-local'),
      backend: 'venv',
      frontend: 'pip',
      frontendCommand: 'python3',
      environmentYml: yml('cpu-local', { conda: ['python=3.11'], pip: ['alpha==1.0'] }),
      pipOptions: ['--no-index', '--find-links', wheels],
    };
    const { id, outs } = await env.create(inputs);
    expect(outs.installedPackages).toContain('alpha=1.0\n');
    expect(readFileSync(inputs.lockPath, 'utf8')).toContain('alpha==1.0');
    expect(readFileSync(inputs.specPath, 'utf8')).toBe(
      'name: cpu-local\ndependencies:\n  - python=3.11\n  - pip:\n      - alpha==1.0\n',
    );
    expect(JSON.parse(readFileSync(`${inputs.prefix}.kdgat-owner.json`, 'utf8'))).toMatchObject({
      owner: 'kdgat-hpc/e2e',
      state: 'ready',
    });

    const next = { ...inputs, environmentYml: yml('cpu-local', { pip: ['alpha==2.0', 'beta==0.1'] }) };
    expect((await env.diff(id, outs, next)).changes).toBe(true);
    const { outs: updated } = await env.update(id, outs, next);
    expect(updated.installedPackages).toMatch(/^alpha=2\.0\nbeta=0\.1\n/m);
    expect(updated.installedPackages).not.toContain('alpha=1.0');
    expect(readFileSync(inputs.lockPath, 'utf8')).toContain('alpha==2.0');

    execFileSync(join(inputs.prefix, 'bin', 'python'), [
      '-m',
      'pip',
      'install',
      '-q',
      '--no-index',
      '--find-links',
      wheels,
      'gamma==3.0',
    ]);
    const live = await env.read(id, updated);
    expect(live.props!.installedPackages).toContain('gamma=3.0');
    expect((await env.diff(id, live.props!, next)).changes).toBe(true);

    await env.remove(id, updated);
    expect(existsSync(inputs.prefix)).toBe(false);
    expect(existsSync(inputs.lockPath)).toBe(false);
    expect(existsSync(`${inputs.prefix}.kdgat-owner.json`)).toBe(false);
  });

  it("installs a second index's package from exactly its file there (a uv.lock's other registry), the rest from the site's", async () => {
    // The second index: delta's wheel served over loopback only (the site's own index, the
    // find-links dir, has no delta at all), as PyG's index serves torch-scatter.
    const second = makeWheels(join(root, 'second-index'), ['delta==0.5']);
    const wheel = readdirSync(second).find((f) => f.startsWith('delta-'))!;
    const sha = createHash('sha256')
      .update(readFileSync(join(second, wheel)))
      .digest('hex');
    const fetched: string[] = [];
    const server = createServer((req, res) => {
      fetched.push(req.url ?? '');
      const file = join(second, decodeURIComponent((req.url ?? '/').slice(1)));
      if (!existsSync(file)) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(file));
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    try {
      const port = (server.address() as AddressInfo).port;
      const lockFile = join(root, 'research-uv.lock');
      writeFileSync(lockFile, secondIndexLock(`http://127.0.0.1:${port}/${wheel}`, `sha256:${sha}`));
      // The environment's pip lines as the site build gets them (an absolute lock path: the test's).
      const pipelineLines = pipRequirements({
        name: 'second-index',
        backend: 'venv',
        python: '3.11',
        pipelinePins: true,
        pipelineLock: { file: lockFile, project: 'research' },
        requirements: [],
      } as unknown as EnvironmentSpec);
      expect(pipelineLines).toEqual([
        'alpha==1.0',
        `delta @ http://127.0.0.1:${port}/${wheel}#sha256=${sha}`,
      ]);
      const inputs: env.EnvironmentInputs = {
        ...base(root, 'second-index'),
        backend: 'venv',
        frontend: 'pip',
        frontendCommand: 'python3',
        environmentYml: yml('second-index', { conda: ['python=3.11'], pip: pipelineLines }),
        pipOptions: ['--no-index', '--find-links', wheels],
      };
      const { id, outs } = await env.create(inputs);
      expect(outs.installedPackages).toMatch(/^alpha=1\.0\ndelta=0\.5\n/m);
      expect(fetched).toEqual([`/${wheel}`]);
      await env.remove(id, outs);
    } finally {
      server.close();
    }
  });
});

/** A uv.lock whose project needs alpha (the default index) and delta (only a second one serves it). */
function secondIndexLock(deltaUrl: string, hash: string): string {
  return [
    'version = 1',
    '[[package]]',
    'name = "research"',
    'version = "0.1.0"',
    'source = { editable = "." }',
    'dependencies = [{ name = "alpha" }, { name = "delta" }]',
    '[[package]]',
    'name = "alpha"',
    'version = "1.0"',
    'source = { registry = "https://pypi.org/simple" }',
    '[[package]]',
    'name = "delta"',
    'version = "0.5"',
    `source = { registry = "${deltaUrl.replace(/\/[^/]*$/, '/simple')}" }`,
    `wheels = [{ url = "${deltaUrl}", hash = "${hash}" }]`,
    '',
  ].join('\n');
}

describe('venv layered over an existing environment (the local stack over python/.venv)', () => {
  it('sees the packages of the inherited environment and installs only its own', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-inherit-'));
    const wheels = makeWheels(join(root, 'wheels'), ['gamma==3.0', 'beta==0.1']);
    const baseEnv = join(root, 'base');
    execFileSync('python3', ['-m', 'venv', baseEnv]);
    execFileSync(join(baseEnv, 'bin', 'python'), [
      '-m',
      'pip',
      'install',
      '-q',
      '--no-index',
      '--find-links',
      wheels,
      'gamma==3.0',
    ]);
    // an editable install, as uv makes for the kdgat package: a .pth file in the base site-packages
    const editable = join(root, 'src');
    mkdirSync(join(editable, 'delta'), { recursive: true });
    writeFileSync(join(editable, 'delta', '__init__.py'), 'VERSION = "editable"\n');
    const basePurelib = execFileSync(
      join(baseEnv, 'bin', 'python'),
      ['-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'],
      {
        encoding: 'utf8',
      },
    ).trim();
    writeFileSync(join(basePurelib, '_delta.pth'), `${editable}\n`);
    const inputs: env.EnvironmentInputs = {
      ...base(root, 'cpu-local'),
      backend: 'venv',
      frontend: 'pip',
      frontendCommand: join(baseEnv, 'bin', 'python'),
      inheritEnvironments: [baseEnv],
      environmentYml: yml('cpu-local', { pip: ['beta==0.1'] }),
      pipOptions: ['--no-index', '--find-links', wheels],
    };
    const { id, outs } = await env.create(inputs);
    const python = join(inputs.prefix, 'bin', 'python');
    expect(
      execFileSync(
        python,
        ['-c', 'import gamma, beta, delta; print(gamma.__version__, beta.__version__, delta.VERSION)'],
        {
          encoding: 'utf8',
        },
      ),
    ).toBe('3.0 0.1 editable\n');
    expect(existsSync(join(inputs.prefix, 'lib'))).toBe(true);
    await env.remove(id, outs);
    expect(existsSync(join(baseEnv, 'bin', 'python'))).toBe(true);
  });
});

describe('conda backend (py-rattler from a local channel)', () => {
  it('creates, updates (dropping a package) and removes a conda environment', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-conda-'));
    const channel = makeCondaChannel(join(root, 'channel'), [
      'pytorch=2.7',
      'pytorch=2.8',
      'cugraph=26.10:pytorch',
      'numpy=2.3',
    ]);
    const inputs: env.EnvironmentInputs = {
      ...base(root, 'gnn-rapids'),
      backend: 'conda',
      frontend: 'rattler',
      frontendCommand: rattlerPython(),
      environmentYml: yml('gnn-rapids', { channels: [channel], conda: ['pytorch=2.7', 'numpy=2.3'] }),
      pipOptions: [],
    };
    const { id, outs } = await env.create(inputs);
    expect(outs.installedPackages).toBe('numpy=2.3\npytorch=2.7\n');
    expect(existsSync(join(inputs.prefix, 'conda-meta'))).toBe(true);
    const lock = readFileSync(inputs.lockPath, 'utf8');
    expect(lock).toContain('@EXPLICIT');
    expect(lock).toMatch(new RegExp(`${channel}/noarch/pytorch-2.7-0.tar.bz2#[0-9a-f]{32}`));

    const next = {
      ...inputs,
      environmentYml: yml('gnn-rapids', { channels: [channel], conda: ['pytorch=2.8', 'cugraph=26.10'] }),
    };
    const { outs: updated } = await env.update(id, outs, next);
    expect(updated.installedPackages).toBe('cugraph=26.10\npytorch=2.8\n');
    expect(existsSync(join(inputs.prefix, 'share', 'kdgat-test', 'numpy.txt'))).toBe(false);
    expect(updated.lockHash).not.toBe(outs.lockHash);

    await env.remove(id, updated);
    expect(existsSync(inputs.prefix)).toBe(false);
  });

  it("solves a CUDA package on a machine without a GPU only when told the spec's CUDA (CONDA_OVERRIDE_CUDA)", async (t) => {
    // With an NVIDIA driver the solver detects __cuda itself and the refusal cannot be shown.
    if (existsSync('/proc/driver/nvidia/version')) {
      const why =
        'an NVIDIA driver is present: the solver detects __cuda itself, so the refusal cannot be shown';
      console.warn(`skipped: solving a CUDA package without a GPU: ${why}`);
      t.skip(why);
    }
    const root = mkdtempSync(join(tmpdir(), 'kdgat-cuda-'));
    // as RAPIDS' packages do: cugraph needs the __cuda virtual package (a GPU driver)
    const channel = makeCondaChannel(join(root, 'channel'), ['cugraph=26.10:__cuda>=12', 'numpy=2.3']);
    const inputs: env.EnvironmentInputs = {
      ...base(root, 'gnn-rapids'),
      backend: 'conda',
      frontend: 'rattler',
      frontendCommand: rattlerPython(),
      environmentYml: yml('gnn-rapids', { channels: [channel], conda: ['cugraph=26.10', 'numpy=2.3'] }),
      pipOptions: [],
    };
    await expect(env.create(inputs)).rejects.toThrow(/building environment 'gnn-rapids'[\s\S]*__cuda/);
    const { id, outs } = await env.create({
      ...inputs,
      solveEnvironment: frontendFor('rattler').solveEnvironment('12.4'),
    });
    expect(outs.installedPackages).toBe('cugraph=26.10\nnumpy=2.3\n');
    await env.remove(id, outs);
  });

  it('refuses an environment someone else built, adopts it with adopt: true, and keeps it on delete', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-adopt-'));
    const channel = makeCondaChannel(join(root, 'channel'), ['pytorch=2.7', 'numpy=2.3']);
    const prefix = join(root, 'envs', 'gnn-rapids');
    // built by hand, without this stack: py-rattler straight from the helper
    execFileSync(
      rattlerPython(),
      [
        new URL('../../providers/frontends/rattler_env.py', import.meta.url).pathname,
        'create',
        '--prefix',
        prefix,
      ],
      {
        input: JSON.stringify({ channels: [channel], specs: ['numpy=2.3'] }),
      },
    );
    const inputs: env.EnvironmentInputs = {
      ...base(root, 'gnn-rapids'),
      backend: 'conda',
      frontend: 'rattler',
      frontendCommand: rattlerPython(),
      environmentYml: yml('gnn-rapids', { channels: [channel], conda: ['pytorch=2.7'] }),
      pipOptions: [],
    };
    await expect(env.create(inputs)).rejects.toThrow(
      /already exists at .* and was not created by stack kdgat-hpc\/e2e .*Set adopt: true/,
    );
    expect(existsSync(join(prefix, 'share', 'kdgat-test', 'numpy.txt'))).toBe(true);

    const { id, outs } = await env.create({ ...inputs, adopt: true });
    expect(outs.adopted).toBe(true);
    expect(outs.installedPackages).toBe('pytorch=2.7\n');
    await env.remove(id, outs);
    expect(existsSync(join(prefix, 'conda-meta'))).toBe(true);
    expect(existsSync(`${prefix}.kdgat-owner.json`)).toBe(false);
  });
});
