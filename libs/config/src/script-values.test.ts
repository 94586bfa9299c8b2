// One rule per script value: whatever reaches a job script is refused at validation, with
// file:line, the field, the value found and what was expected in the user's words.
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  checkSpecAgainstSite,
  loadExperimentSpec,
  matchesRule,
  SCRIPT_VALUES,
  SpecValidationError,
  type SpecIssue,
} from './index.ts';
import { LOCAL_SPEC, PITZER_SPEC } from './test-support/specs.ts';

function issuesOf(run: () => unknown): SpecIssue[] {
  try {
    run();
  } catch (e) {
    if (e instanceof SpecValidationError) return e.issues;
    throw e;
  }
  throw new Error('expected the spec to be refused');
}

const specIssues = (text: string, file = 'spec.yaml') => issuesOf(() => loadExperimentSpec({ text, file }));

describe('values that reach a script are refused at validation', () => {
  it('account: -rf (sbatch would read it as an option)', () => {
    const [i] = specIssues(PITZER_SPEC.replace('account: PAS1266', 'account: -rf'));
    expect(i).toMatchObject({
      file: 'spec.yaml',
      line: 4,
      path: 'account',
      found: '"-rf"',
      expected: 'a SLURM account such as PAS1266',
    });
  });

  it('a GPU type in the user words, with the value found', () => {
    const [i] = specIssues(PITZER_SPEC.replace('type: v100', 'type: "V100 --x"'));
    expect(i).toMatchObject({
      line: 14,
      path: 'stages[0].resources.gpus.type',
      expected: 'a GPU type such as v100, a100 or h100',
      found: '"V100 --x"',
    });
    expect(i!.message).not.toMatch(/Invalid|regex|pattern/i);
  });

  it('a requeue signal the job script cannot forward (TERM is the scheduler kill signal)', () => {
    const [i] = specIssues(`${LOCAL_SPEC}requeue:\n  signal: TERM\n`);
    expect(i).toMatchObject({
      path: 'requeue.signal',
      found: '"TERM"',
      expected: expect.stringContaining('USR1'),
    });
  });

  it('a SLURM time', () => {
    const [i] = specIssues(LOCAL_SPEC.replace('time: "0:20:00"', 'time: "20 minutes"'));
    expect(i).toMatchObject({
      path: 'stages[0].resources.time',
      found: '"20 minutes"',
      expected: SCRIPT_VALUES.slurmTime.expected,
    });
  });

  it('modules.* of a cluster file, with the cluster file line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-cluster-'));
    const cluster = join(dir, 'site.yaml');
    writeFileSync(
      cluster,
      [
        'name: site',
        'clusterName: site',
        'connection: { kind: local }',
        'scheduler: slurm',
        'partitions:',
        '  - { name: gpu, gpusPerNode: 1, coresPerNode: 4, memPerNodeGB: 16, maxWalltime: "1:00:00" }',
        'defaultPartition: gpu',
        'modules:',
        '  cuda: "-rf"',
        'paths: { projectRoot: /p, scratchRoot: /s, homeCacheRoot: /h, logsDir: /l }',
        'scratchPurgeDays: 60',
        '',
      ].join('\n'),
    );
    const spec = LOCAL_SPEC.replace('cluster: local', 'cluster: site.yaml');
    const [i] = specIssues(spec, join(dir, 'spec.yaml'));
    expect(i).toMatchObject({
      file: cluster,
      line: 9,
      path: 'modules.cuda',
      found: '"-rf"',
      expected: 'a module name such as cuda/12.4.1',
    });
  });

  it('a value of the wrong kind, in words rather than zod type names', () => {
    const [i] = specIssues(LOCAL_SPEC.replace('cpus: 2', 'cpus: two'));
    expect(i).toMatchObject({
      path: 'stages[0].resources.cpus',
      message: '"two" is the wrong kind of value',
      expected: 'a number',
      found: '"two"',
    });
  });

  it('every rule refuses a leading dash, whitespace and shell text', () => {
    for (const [kind, rule] of Object.entries(SCRIPT_VALUES)) {
      for (const bad of ['-rf', 'a b', 'x;rm', '$(id)', 'a\nb', ''])
        expect(matchesRule(rule, bad), `${kind} accepts ${JSON.stringify(bad)}`).toBe(false);
    }
  });
});

describe('cluster: and environment: read only YAML files or presets', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cfg-refs-'));
  const secret = join(dir, 'secret.txt');
  writeFileSync(secret, 'root:x:0:0:TOPSECRET:/root:/bin/bash\n');

  it('a path to a file that is not .yaml/.yml is refused without being read', () => {
    for (const ref of [secret, '/etc/passwd']) {
      const issues = specIssues(
        LOCAL_SPEC.replace('cluster: local', `cluster: ${ref}`),
        join(dir, 'spec.yaml'),
      );
      expect(issues).toHaveLength(1);
      expect(issues[0]).toMatchObject({ path: 'cluster', line: 2, found: JSON.stringify(ref) });
      expect(issues[0]!.message).toContain('.yaml or .yml');
      expect(JSON.stringify(issues)).not.toMatch(/TOPSECRET|root:x/);
    }
  });

  it('a .yaml file that is not a profile says so and does not quote it', () => {
    const notProfile = join(dir, 'notes.yaml');
    writeFileSync(notProfile, 'TOPSECRET text, not a mapping\n');
    const other = join(dir, 'other.yml');
    writeFileSync(other, 'password: TOPSECRET\nuser: me\n');
    for (const f of [notProfile, other]) {
      const issues = specIssues(
        LOCAL_SPEC.replace('environment: cpu-local', `environment: ${f}`),
        join(dir, 'spec.yaml'),
      );
      expect(issues).toHaveLength(1);
      expect(issues[0]!.message).toContain('is not an environment spec');
      expect(JSON.stringify(issues)).not.toContain('TOPSECRET');
    }
  });

  it('a directory named .yaml, or a missing file, is refused as missing', () => {
    mkdirSync(join(dir, 'dir.yaml'), { recursive: true });
    const [i] = specIssues(LOCAL_SPEC.replace('cluster: local', 'cluster: dir.yaml'), join(dir, 'spec.yaml'));
    expect(i!.message).toMatch(/does not exist/);
  });

  it('an unknown preset name suggests the nearest one', () => {
    const [i] = specIssues(LOCAL_SPEC.replace('cluster: local', 'cluster: osc-pitzr'));
    expect(i!.message).toContain('did you mean `osc-pitzer`');
  });
});

describe('datasets against the site (checkSpecAgainstSite)', () => {
  const site = { stack: 'osc-pitzer', cacheDirs: { hcrl_sa: '/s/cache/hcrl_sa', set_01: '/s/cache/set_01' } };

  it('refuses a staging list naming a dataset without a cache dir, at its line', () => {
    const loaded = loadExperimentSpec({
      text: `${PITZER_SPEC}staging:\n  enabled: true\n  datasets: [hcrl_sa, car_hacking]\n`,
      file: 'spec.yaml',
    });
    const [i, ...rest] = issuesOf(() => checkSpecAgainstSite(loaded, site));
    expect(rest).toEqual([]);
    expect(i).toMatchObject({
      file: 'spec.yaml',
      line: 18,
      path: 'staging.datasets[1]',
      found: '"car_hacking"',
      expected: expect.stringContaining('hcrl_sa, set_01'),
    });
    expect(i!.message).toContain('kdgat-hpc:datasets');
  });

  it("without a staging list, each stage's dataset needs a cache dir", () => {
    const loaded = loadExperimentSpec({
      text: PITZER_SPEC.replace('dataset: hcrl_sa', 'dataset: hcrl_ch'),
      file: 'spec.yaml',
    });
    const [i] = issuesOf(() => checkSpecAgainstSite(loaded, site));
    expect(i).toMatchObject({ line: 10, path: 'stages[0].dataset', found: '"hcrl_ch"' });
  });

  it('accepts a spec whose datasets all have cache dirs', () => {
    const loaded = loadExperimentSpec({
      text: `${PITZER_SPEC}staging:\n  enabled: true\n`,
      file: 'spec.yaml',
    });
    expect(() => checkSpecAgainstSite(loaded, site)).not.toThrow();
  });
});
