// A cluster site through SSH (a real sshd on loopback) with a conda environment built by
// py-rattler from a local channel, driven by the real Pulumi CLI. As on OSC, the frontend comes from
// a module: the real Lmod, a non-interactive login, and the frontend off PATH until it is loaded.
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StackOutputs } from '@kdgat/config';
import * as environment from '../../providers/environment.impl.ts';
import { ymlForDisplay } from '../../providers/environment-spec.ts';
import { runChecked, sshExecutor, type Connection } from '@kdgat/transport';
import { withModules } from '../../providers/module-shell.ts';
import { makeModuleTree, type ModuleTree } from './modules.ts';
import { TempStack, ok } from './pulumi-harness.ts';
import { startSshd, strayHostKey, type LoopbackSshd } from './sshd.ts';
import { makeCondaChannel, rattlerPython } from './tools.ts';

function sshConfig(
  root: string,
  sshd: LoopbackSshd,
  tree: ModuleTree,
  channel: string,
  dependencies: string[],
  opts: { hostKey?: string; cuda?: string } = {},
) {
  return {
    cluster: 'local',
    clusterOverrides: {
      name: 'loopback-ssh',
      connection: {
        kind: 'ssh',
        host: sshd.host,
        port: sshd.port,
        user: sshd.user,
        hostKey: opts.hostKey ?? sshd.hostKey,
      },
      // Debian's Lmod init, as the site's; the login defines `module` already, so it is the fallback.
      modules: { ...tree.modules, cuda: opts.cuda ?? tree.modules.cuda, init: '/etc/profile.d/lmod.sh' },
      paths: {
        projectRoot: join(root, 'project'),
        scratchRoot: join(root, 'scratch'),
        homeCacheRoot: join(root, 'home-cache'),
        logsDir: join(root, 'scratch', 'logs'),
      },
    },
    environment: {
      name: 'gnn-e2e',
      backend: 'conda',
      frontend: 'rattler',
      channels: [channel],
      dependencies,
      // A RAPIDS environment targets a CUDA version, as gnn-rapids does; this login node has no GPU.
      ...(dependencies.some((d) => d.startsWith('cugraph')) ? { cudaVersion: '12.4' } : {}),
    },
    datasets: ['hcrl_sa'],
    build: { frontendCommand: tree.frontendCommand },
  };
}

describe('ssh site with a conda environment (py-rattler) through the Pulumi CLI', () => {
  let root: string;
  let channel: string;
  let sshd: LoopbackSshd;
  let tree: ModuleTree;
  let conn: Extract<Connection, { kind: 'ssh' }>;
  let s: TempStack;
  let out: StackOutputs;
  const config = (deps: string[], opts: { hostKey?: string; cuda?: string } = {}) =>
    sshConfig(root, sshd, tree, channel, deps, opts);

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'kdgat-ssh-site-'));
    channel = makeCondaChannel(join(root, 'channel'), [
      'pytorch=2.7',
      'pytorch=2.8',
      'cugraph=26.10:pytorch,__cuda>=12',
      'numpy=2.3',
    ]);
    tree = makeModuleTree(root, rattlerPython());
    // The login node's module tree, as a site sets MODULEPATH for every session.
    sshd = await startSshd({ env: { MODULEPATH: tree.modulePath } });
    conn = { kind: 'ssh', host: sshd.host, port: sshd.port, user: sshd.user, hostKey: sshd.hostKey };
    conn.privateKey = sshd.clientKey;
    s = new TempStack('e2e-ssh', config(['pytorch=2.7', 'numpy=2.3']));
    s.setSecret('sshPrivateKey', sshd.clientKey);
  });
  afterAll(() => {
    s?.destroy();
    sshd?.stop();
  });

  it('a non-interactive ssh login finds the frontend only after its module is loaded', async () => {
    const login = await sshExecutor(conn).run(['bash', '-l', '-c', 'command -v rattler-python'], {
      timeoutSeconds: 60,
    });
    expect(login.code).not.toBe(0);
    const loaded = await runChecked(
      sshExecutor(conn),
      withModules({ profile: 'loopback-ssh', modules: tree.modules }, [
        'sh',
        '-c',
        'command -v rattler-python',
      ]),
      { timeoutSeconds: 60 },
    );
    expect(loaded.trim()).toBe(join(root, 'apps', 'py-rattler', 'bin', 'rattler-python'));
  });

  it("refuses a fresh environment whose module is missing, with the module system's message, building nothing", async () => {
    const prefix = join(root, 'fresh', 'envs', 'gnn-fresh');
    const inputs: environment.EnvironmentInputs = {
      connection: conn,
      owner: 'kdgat-hpc/e2e-ssh',
      name: 'gnn-fresh',
      backend: 'conda',
      frontend: 'rattler',
      frontendCommand: tree.frontendCommand,
      prefix,
      environmentYml: ymlForDisplay(
        `name: gnn-fresh\nchannels:\n  - ${channel}\ndependencies:\n  - numpy=2.3\n`,
      ),
      specHash: 'fresh',
      pipOptions: [],
      inheritEnvironments: [],
      specPath: join(root, 'fresh', 'envs', 'gnn-fresh.environment.yml'),
      lockPath: join(root, 'fresh', 'envs', 'gnn-fresh.lock.txt'),
      adopt: false,
      timeoutSeconds: 120,
      profile: 'loopback-ssh',
      modules: { ...tree.modules, cuda: 'cuda/99.9' },
    };
    const refused = environment.create(inputs);
    await expect(refused).rejects.toThrow(/The following module\(s\) are unknown:[\s\S]*"cuda\/99\.9"/);
    await expect(refused).rejects.toThrow(/could not be loaded on .*; nothing was changed/);
    expect(existsSync(join(root, 'fresh'))).toBe(false);
  });

  it('up builds the conda environment, the layout and the scripts over ssh', () => {
    ok(s.up());
    out = s.outputs();
    // Every frontend call ran with both profile modules loaded.
    const calls = tree.frontendCalls();
    expect(calls.length).toBeGreaterThanOrEqual(3); // create, lock, list
    for (const loaded of calls)
      expect(loaded.split(':').sort()).toEqual(['cuda/12.4.1', 'py-rattler/0.28.0']);
    expect(out.environments[0]).toMatchObject({ name: 'gnn-e2e', backend: 'conda' });
    expect(existsSync(join(out.environments[0]!.prefix, 'conda-meta'))).toBe(true);
    expect(readFileSync(out.environments[0]!.lockPath, 'utf8')).toMatch(
      /@EXPLICIT\n[\s\S]*pytorch-2\.7-0\.tar\.bz2#[0-9a-f]{32}/,
    );
    expect(statSync(out.scripts.trainGpu).mode & 0o111).toBe(0o111);
    expect(statSync(out.scratch.cacheDirs.hcrl_sa!).isDirectory()).toBe(true);
  });

  it('never writes the private key to the state in clear', () => {
    const body = sshd.clientKey.split('\n').filter((l) => l && !l.startsWith('-----'));
    const state = s.stateText();
    expect(state.length).toBeGreaterThan(1000);
    for (const line of body) expect(state).not.toContain(line);
    expect(state).not.toContain('OPENSSH PRIVATE KEY');
  });

  it('preview --diff shows the package-level change and the CUDA the solve is told, and up applies it', () => {
    s.setConfig(config(['pytorch=2.8', 'cugraph=26.10']));
    const preview = ok(s.preview());
    // cugraph needs __cuda: without the override the solve on this GPU-less node would fail
    expect(preview.stdout).toMatch(/CONDA_OVERRIDE_CUDA\s*:\s*"12\.4"/);
    expect(preview.stdout).toMatch(/^\s*-\s.*pytorch=2\.7/m);
    expect(preview.stdout).toMatch(/^\s*\+\s.*pytorch=2\.8/m);
    expect(preview.stdout).toMatch(/^\s*\+\s.*cugraph=26\.10/m);
    expect(preview.stdout).toMatch(/^\s*-\s.*numpy=2\.3/m);
    ok(s.up());
    expect(existsSync(join(out.environments[0]!.prefix, 'share', 'kdgat-test', 'cugraph.txt'))).toBe(true);
    expect(existsSync(join(out.environments[0]!.prefix, 'share', 'kdgat-test', 'numpy.txt'))).toBe(false);
    ok(s.up(['--expect-no-changes']));
  });

  it("stops up with the module system's message when a module is missing, and keeps the environment", () => {
    const lockBefore = readFileSync(out.environments[0]!.lockPath, 'utf8');
    s.setConfig(config(['pytorch=2.8', 'cugraph=26.10'], { cuda: 'cuda/99.9' }));
    const r = s.up();
    expect(r.code).not.toBe(0);
    expect(r.output).toContain('The following module(s) are unknown');
    expect(r.output).toContain('"cuda/99.9"');
    expect(r.output).toContain('nothing was changed');
    expect(readFileSync(out.environments[0]!.lockPath, 'utf8')).toBe(lockBefore);
    expect(existsSync(join(out.environments[0]!.prefix, 'share', 'kdgat-test', 'cugraph.txt'))).toBe(true);
    s.setConfig(config(['pytorch=2.8', 'cugraph=26.10']));
  });

  it('refuses a server whose host key is not the pinned one', () => {
    s.setConfig(config(['pytorch=2.8', 'cugraph=26.10'], { hostKey: strayHostKey() }));
    const r = s.up();
    expect(r.code).not.toBe(0);
    expect(r.output).toContain("the server's host key does not match the pinned hostKey");
    s.setConfig(config(['pytorch=2.8', 'cugraph=26.10']));
  });

  it('destroy removes the environment and the scripts over ssh and keeps the scratch layout', () => {
    ok(s.destroy());
    expect(existsSync(out.environments[0]!.prefix)).toBe(false);
    expect(existsSync(out.scripts.trainGpu)).toBe(false);
    expect(statSync(out.scratch.cacheDirs.hcrl_sa!).isDirectory()).toBe(true);
  });
});
