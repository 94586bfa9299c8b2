import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  rawSiteConfigFromStackFile,
  siteFromStackConfig,
  sitePathsFor,
  StackConfigError,
} from './stack-config.ts';

const repo = new URL('../../../../', import.meta.url).pathname;
const stackFile = (name: string) =>
  readFileSync(new URL(`../../../../stacks/${name}.yaml`, import.meta.url), 'utf8');

describe('a stack file read as the site it declares', () => {
  it('osc-pitzer: every environment the examples use, each with its build and kernel; datasets', () => {
    const site = siteFromStackConfig(rawSiteConfigFromStackFile(stackFile('osc-pitzer'), 'kdgat-hpc'), repo);
    expect(site.profile).toMatchObject({ name: 'osc-pitzer', account: 'PAS1266' });
    expect(site.profile.paths.scratchRoot).toBe('/fs/scratch/PAS1266/kd-gat');
    expect(site.environments.map((e) => e.spec.name)).toEqual([
      'gnn-rapids',
      'gnn-rapids-cugraphops',
      'gnn-cpu',
    ]);
    for (const e of site.environments)
      expect(e.build).toMatchObject({ frontend: 'conda', frontendCommand: 'conda' });
    expect(site.environments.map((e) => e.kernel?.displayName ?? null)).toEqual([
      'KD-GAT (gnn-rapids, CUDA 12.8)',
      null,
      'KD-GAT (gnn-cpu)',
    ]);
    expect(site.datasets).toEqual(['hcrl_sa', 'hcrl_ch', 'set_01']);
    // Each data set's raw recordings under the stack's rawDataRoot, on project storage.
    expect(site.rawData).toEqual({
      hcrl_sa: '/fs/ess/PAS1266/kd-gat/data/raw/hcrl_sa',
      hcrl_ch: '/fs/ess/PAS1266/kd-gat/data/raw/hcrl_ch',
      set_01: '/fs/ess/PAS1266/kd-gat/data/raw/set_01',
    });
    expect(site.scratchGroup).toBe('PAS1266');
    // Ascend and Cardinal: their own partitions and charging, Pitzer's login node, account and paths.
    expect(site.clusters.map((c) => [c.name, c.clusterName, c.defaultPartition])).toEqual([
      ['osc-ascend', 'ascend', 'nextgen'],
      ['osc-cardinal', 'cardinal', 'gpu'],
    ]);
    for (const c of site.clusters) {
      expect(c.connection).toEqual(site.profile.connection);
      expect(c.account).toBe('PAS1266');
      expect(c.paths).toEqual(site.profile.paths);
    }
    expect(site.clusters[0]!.partitions.map((p) => p.gpuType)).toEqual(['a100', 'a100', 'a100']);
  });

  it('local: relative paths anchored at the repository', () => {
    const site = siteFromStackConfig(rawSiteConfigFromStackFile(stackFile('local'), 'kdgat-hpc'), repo);
    expect(site.profile.paths.scratchRoot.startsWith(repo)).toBe(true);
    const [env] = site.environments;
    expect(env!.build.frontendCommand).toBe(`${repo}python/.venv/bin/python`);
    const paths = sitePathsFor(site.profile, env!.spec.name, env!.build);
    expect(paths.lockPath).toBe(`${site.profile.paths.projectRoot}/envs/cpu-local.lock.txt`);
  });

  it('an entry is a preset, a preset with overrides and its own build, or a whole spec', () => {
    const site = siteFromStackConfig(
      {
        cluster: 'local',
        environments: [
          'cpu-local',
          { preset: 'cpu-local', name: 'cpu-prep', build: { frontendCommand: '/usr/bin/python3' } },
          { name: 'tools', backend: 'venv', python: '3.12', requirements: ['optuna==4.1.0'] },
        ],
        build: { frontend: 'pip', frontendCommand: 'python/.venv/bin/python' },
      },
      repo,
    );
    expect(site.environments.map((e) => [e.spec.name, e.build.frontendCommand])).toEqual([
      ['cpu-local', `${repo}python/.venv/bin/python`],
      ['cpu-prep', '/usr/bin/python3'],
      ['tools', `${repo}python/.venv/bin/python`],
    ]);
    expect(site.environments[1]!.spec).toMatchObject({ backend: 'venv', pipelinePins: true });
  });

  it('the one-environment form of older stacks is a one-entry list', () => {
    const site = siteFromStackConfig(
      { cluster: 'local', environment: 'cpu-local', environmentOverrides: { name: 'mine' } },
      repo,
    );
    expect(site.environments.map((e) => e.spec.name)).toEqual(['mine']);
  });

  it('refuses two environments of one name, a fixed prefix shared by several, and both forms at once', () => {
    expect(() =>
      siteFromStackConfig({ cluster: 'local', environments: ['cpu-local', { preset: 'cpu-local' }] }, repo),
    ).toThrow(/environments\[1\]\.name = "cpu-local": expected a name no other environment of the stack has/);
    expect(() =>
      siteFromStackConfig(
        {
          cluster: 'local',
          environments: ['cpu-local', { preset: 'cpu-local', name: 'b' }],
          build: { prefix: '/opt/env' },
        },
        repo,
      ),
    ).toThrow(/environments\[0\]\.build\.prefix = "\/opt\/env": expected no fixed prefix/);
    expect(() =>
      siteFromStackConfig({ cluster: 'local', environments: ['cpu-local'], environment: 'cpu-local' }, repo),
    ).toThrow(/stack config environment = "cpu-local": expected no `environment` beside `environments`/);
    expect(() => siteFromStackConfig({ cluster: 'local', environments: [] }, repo)).toThrow(
      /environments = \[\]: expected a non-empty list/,
    );
    expect(() => siteFromStackConfig({ cluster: 'local', environments: ['nope'] }, repo)).toThrow(
      /environments\[0\] = "nope": expected one of/,
    );
  });

  it('refuses kernels without a kernels dir on a remote site, and two kernels of one name', () => {
    const kernel = { displayName: 'KD-GAT' };
    expect(() =>
      siteFromStackConfig(
        {
          cluster: 'osc-pitzer',
          clusterOverrides: {
            connection: {
              kind: 'ssh',
              host: 'pitzer.osc.edu',
              port: 22,
              user: 'me',
              hostKey: 'ssh-ed25519 AAAA',
            },
          },
          environments: [{ preset: 'gnn-rapids', kernel }],
        },
        repo,
      ),
    ).toThrow(
      /clusterOverrides\.paths\.kernelsDir = undefined: expected the site user's Jupyter kernels directory/,
    );
    expect(() =>
      siteFromStackConfig(
        {
          cluster: 'local',
          clusterOverrides: { paths: { kernelsDir: '/tmp/k' } },
          environments: [
            { preset: 'cpu-local', kernel: { ...kernel, name: 'KDGAT' } },
            { preset: 'cpu-local', name: 'b', kernel: { ...kernel, name: 'kdgat' } },
          ],
        },
        repo,
      ),
    ).toThrow(/environments\[1\]\.kernel\.name = "kdgat": expected a kernel name no other kernel/);
  });

  it("an ssh connection's polling: none given is --wait's default; a site's own is kept; a maximum under the minimum is refused", () => {
    const ssh = (poll?: unknown) => ({
      cluster: 'osc-pitzer',
      clusterOverrides: {
        connection: {
          kind: 'ssh',
          host: 'pitzer.osc.edu',
          user: 'me',
          hostKey: 'ssh-ed25519 AAAA',
          ...(poll === undefined ? {} : { poll }),
        },
      },
      environments: ['gnn-cpu'],
    });
    const pollOf = (raw: Parameters<typeof siteFromStackConfig>[0]) => {
      const connection = siteFromStackConfig(raw, repo).profile.connection;
      return connection.kind === 'ssh' ? connection.poll : 'not ssh';
    };
    expect(pollOf(ssh())).toBeUndefined();
    expect(pollOf(ssh({ minSeconds: 2 }))).toEqual({ minSeconds: 2, maxSeconds: 30 });
    expect(pollOf(ssh({ minSeconds: 2, maxSeconds: 4 }))).toEqual({ minSeconds: 2, maxSeconds: 4 });
    expect(() => pollOf(ssh({ minSeconds: 10, maxSeconds: 4 }))).toThrow(
      /connection\.poll\.maxSeconds: maxSeconds 4 is under minSeconds 10: expected at least 10/,
    );
    expect(() => pollOf(ssh({ minSeconds: 0.1 }))).toThrow(/connection\.poll\.minSeconds/);
  });

  it('refuses a stack file without a cluster, and a dataset name that cannot reach a script', () => {
    expect(() =>
      rawSiteConfigFromStackFile('config:\n  kdgat-hpc:environments: [cpu-local]\n', 'kdgat-hpc'),
    ).toThrow(StackConfigError);
    expect(() =>
      siteFromStackConfig({ cluster: 'local', environment: 'cpu-local', datasets: ['ok', '-rf'] }, repo),
    ).toThrow(/datasets.*"-rf"/);
  });
});

describe("a site's other clusters (`clusters`)", () => {
  const base = { cluster: 'osc-pitzer', environments: ['gnn-cpu'] };

  it('takes presets and objects over a preset, and refuses what the clusters share, a repeated name and a bad entry', () => {
    const site = siteFromStackConfig(
      { ...base, clusters: [{ preset: 'osc-ascend', limits: { maxRunningJobsPerUser: 64 } }] },
      repo,
    );
    expect(site.clusters[0]).toMatchObject({ name: 'osc-ascend', limits: { maxRunningJobsPerUser: 64 } });
    expect(() =>
      siteFromStackConfig({ ...base, clusters: [{ preset: 'osc-ascend', account: 'PAS0001' }] }, repo),
    ).toThrow(
      'stack config clusters[0].account = "PAS0001": expected nothing: a site\'s clusters share its account',
    );
    expect(() => siteFromStackConfig({ ...base, clusters: ['osc-pitzer'] }, repo)).toThrow(
      'stack config clusters[0].name = "osc-pitzer": expected a name no other cluster of the stack has',
    );
    expect(() =>
      siteFromStackConfig(
        { ...base, clusters: [{ preset: 'osc-ascend', name: 'other', clusterName: 'pitzer' }] },
        repo,
      ),
    ).toThrow(
      'clusters[0].clusterName = "pitzer": expected a SLURM cluster name (-M) no other cluster of the stack has',
    );
    expect(() => siteFromStackConfig({ ...base, clusters: ['osc-nowhere'] }, repo)).toThrow(
      'stack config clusters[0] = "osc-nowhere": expected one of osc-pitzer, osc-ascend, osc-cardinal, local or an object',
    );
    expect(() => siteFromStackConfig({ ...base, clusters: 'osc-ascend' }, repo)).toThrow(
      'stack config clusters = "osc-ascend": expected a list of cluster preset names or objects',
    );
  });

  it('a stack without them has none', () => {
    expect(siteFromStackConfig(base, repo).clusters).toEqual([]);
  });
});
