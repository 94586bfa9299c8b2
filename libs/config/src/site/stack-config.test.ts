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
  readFileSync(new URL(`../../../../infra/Pulumi.${name}.yaml`, import.meta.url), 'utf8');

describe('a stack file read as the site it declares', () => {
  it('osc-pitzer: the preset with its overrides, datasets and the conda build', () => {
    const site = siteFromStackConfig(rawSiteConfigFromStackFile(stackFile('osc-pitzer'), 'kdgat-hpc'), repo);
    expect(site.profile).toMatchObject({ name: 'osc-pitzer', account: 'PAS1266' });
    expect(site.profile.paths.scratchRoot).toBe('/fs/scratch/PAS1266/kd-gat');
    expect(site.environment.name).toBe('gnn-rapids');
    expect(site.datasets).toEqual(['hcrl_sa', 'hcrl_ch', 'set_01']);
    expect(site.build).toMatchObject({ frontend: 'conda', frontendCommand: 'conda' });
    expect(site.scratchGroup).toBe('PAS1266');
  });

  it('local: relative paths anchored at the repository', () => {
    const site = siteFromStackConfig(rawSiteConfigFromStackFile(stackFile('local'), 'kdgat-hpc'), repo);
    expect(site.profile.paths.scratchRoot.startsWith(repo)).toBe(true);
    expect(site.build.frontendCommand).toBe(`${repo}python/.venv/bin/python`);
    const paths = sitePathsFor(site.profile, site.environment.name, site.build);
    expect(paths.lockPath).toBe(`${site.profile.paths.projectRoot}/envs/cpu-local.lock.txt`);
  });

  it('refuses a stack file without a cluster, and a dataset name that cannot reach a script', () => {
    expect(() =>
      rawSiteConfigFromStackFile('config:\n  kdgat-hpc:environment: cpu-local\n', 'kdgat-hpc'),
    ).toThrow(StackConfigError);
    expect(() =>
      siteFromStackConfig({ cluster: 'local', environment: 'cpu-local', datasets: ['ok', '-rf'] }, repo),
    ).toThrow(/datasets.*"-rf"/);
  });
});
