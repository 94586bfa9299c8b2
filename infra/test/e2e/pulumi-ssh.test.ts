// A cluster site through SSH (a real sshd on loopback) with a conda environment built by
// py-rattler from a local channel, driven by the real Pulumi CLI.
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TempStack, ok, type SiteStackOutputs } from './pulumi-harness.ts';
import { startSshd, strayHostKey, type LoopbackSshd } from './sshd.ts';
import { makeCondaChannel, rattlerPython } from './tools.ts';

function sshConfig(
  root: string,
  sshd: LoopbackSshd,
  channel: string,
  dependencies: string[],
  hostKey = sshd.hostKey,
) {
  return {
    cluster: 'local',
    clusterOverrides: {
      name: 'loopback-ssh',
      connection: { kind: 'ssh', host: sshd.host, port: sshd.port, user: sshd.user, hostKey },
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
    },
    datasets: ['hcrl_sa'],
    build: { frontendCommand: rattlerPython() },
  };
}

describe('ssh site with a conda environment (py-rattler) through the Pulumi CLI', () => {
  let root: string;
  let channel: string;
  let sshd: LoopbackSshd;
  let s: TempStack;
  let out: SiteStackOutputs;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'kdgat-ssh-site-'));
    channel = makeCondaChannel(join(root, 'channel'), [
      'pytorch=2.7',
      'pytorch=2.8',
      'cugraph=26.10:pytorch',
      'numpy=2.3',
    ]);
    sshd = await startSshd();
    s = new TempStack('e2e-ssh', sshConfig(root, sshd, channel, ['pytorch=2.7', 'numpy=2.3']));
    s.setSecret('sshPrivateKey', sshd.clientKey);
  });
  afterAll(() => {
    s?.destroy();
    sshd?.stop();
  });

  it('up builds the conda environment, the layout and the scripts over ssh', () => {
    ok(s.up());
    out = s.outputs();
    expect(out.environment).toMatchObject({ name: 'gnn-e2e', backend: 'conda' });
    expect(existsSync(join(out.environment.prefix, 'conda-meta'))).toBe(true);
    expect(readFileSync(out.environment.lockPath, 'utf8')).toMatch(
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

  it('preview --diff shows the package-level change, and up applies it', () => {
    s.setConfig(sshConfig(root, sshd, channel, ['pytorch=2.8', 'cugraph=26.10']));
    const preview = ok(s.preview());
    expect(preview.stdout).toMatch(/^\s*-\s.*pytorch=2\.7/m);
    expect(preview.stdout).toMatch(/^\s*\+\s.*pytorch=2\.8/m);
    expect(preview.stdout).toMatch(/^\s*\+\s.*cugraph=26\.10/m);
    expect(preview.stdout).toMatch(/^\s*-\s.*numpy=2\.3/m);
    ok(s.up());
    expect(existsSync(join(out.environment.prefix, 'share', 'kdgat-test', 'cugraph.txt'))).toBe(true);
    expect(existsSync(join(out.environment.prefix, 'share', 'kdgat-test', 'numpy.txt'))).toBe(false);
    ok(s.up(['--expect-no-changes']));
  });

  it('refuses a server whose host key is not the pinned one', () => {
    s.setConfig(sshConfig(root, sshd, channel, ['pytorch=2.8', 'cugraph=26.10'], strayHostKey()));
    const r = s.up();
    expect(r.code).not.toBe(0);
    expect(r.output).toContain("the server's host key does not match the pinned hostKey");
    s.setConfig(sshConfig(root, sshd, channel, ['pytorch=2.8', 'cugraph=26.10']));
  });

  it('destroy removes the environment and the scripts over ssh and keeps the scratch layout', () => {
    ok(s.destroy());
    expect(existsSync(out.environment.prefix)).toBe(false);
    expect(existsSync(out.scripts.trainGpu)).toBe(false);
    expect(statSync(out.scratch.cacheDirs.hcrl_sa!).isDirectory()).toBe(true);
  });
});
