import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { environmentPresets, environmentSpecHash, loadExperimentSpec } from '@kdgat/config';
import { describe, expect, it } from 'vitest';
import { outputsFor, sampleOutputs } from '@kdgat/planning/testing';
import { normaliseArgv } from './main.ts';
import { run } from './run-in-process.test-support.ts';

describe('kdgat-runner CLI', () => {
  it('prints its help with every command', async () => {
    const r = await run(['--help']);
    expect(r.code).toBe(0);
    for (const c of [
      'train',
      'plan',
      'tune',
      'tune-report',
      'status',
      'logs',
      'cancel',
      'shell',
      'runs',
      'tensorboard',
      'sync',
      '--where',
      '--serve',
      '--from-manifest',
      '--from-study',
      '--stack-outputs',
    ])
      expect(r.out).toContain(c);
  });

  it('names an unknown command and an unknown option', async () => {
    expect(await run(['launch'])).toMatchObject({
      code: 2,
      err: expect.stringMatching(
        /unknown command "launch": expected init, infra, train, plan, tune, tune-report, status, resume, logs, report, cancel, shell, runs, tensorboard or sync/,
      ),
    });
    expect((await run(['train', '--spce', 'x.yaml'])).err).toMatch(/Unknown option '--spce'/);
  });

  it('asks for a spec, and names a spec file that is not there', async () => {
    expect((await run(['train'])).err).toMatch(/train needs --spec <file.yaml> or --from-manifest/);
    expect((await run(['plan', '--spec', '/nonexistent/x.yaml'])).err).toMatch(
      /--spec \/nonexistent\/x\.yaml: no such file/,
    );
  });

  it('pairs --from-study with --best, and asks tune-report for a study', async () => {
    expect(await run(['train', '--spec', 'x.yaml', '--from-study', 's'])).toMatchObject({
      code: 2,
      err: expect.stringMatching(/--from-study needs --best/),
    });
    expect((await run(['train', '--spec', 'x.yaml', '--best'])).err).toMatch(
      /--best needs --from-study STUDY/,
    );
    expect((await run(['tune', '--spec', 'x.yaml', '--from-study', 's', '--best'])).err).toMatch(
      /--from-study is an option of train, not tune/,
    );
    expect(await run(['tune-report'])).toMatchObject({
      code: 2,
      err: expect.stringMatching(/needs --study/),
    });
  });

  it('takes the boolean flags Nx forwards as --flag=true', () => {
    expect(normaliseArgv(['train', '--wait=true', '--force=false', '--spec=x.yaml'])).toEqual([
      'train',
      '--wait',
      '--spec=x.yaml',
    ]);
  });

  it('names a run directory that does not exist', async () => {
    expect((await run(['status', '/nonexistent/run'])).err).toMatch(
      /run \/nonexistent\/run: no such directory or file/,
    );
  });

  it('asks --allow-env-change to go with --from-manifest', async () => {
    expect(await run(['train', '--spec', 'x.yaml', '--allow-env-change'])).toMatchObject({
      code: 2,
      err: expect.stringMatching(/--allow-env-change goes with --from-manifest/),
    });
  });
});

describe('spec values refused at validation (exit 2, file:line, nothing rendered)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'runner-cli-spec-'));
  const pitzer = readFileSync(resolve(import.meta.dirname, '../../../../examples/kdgat-pitzer.yaml'), 'utf8');
  const stackFile = join(dir, 'stack.json');
  // A stack with every environment kdgat-pitzer.yaml uses (gnn-rapids, and gnn-cpu for preprocess).
  const { resolved: pitzerResolved } = loadExperimentSpec({ text: pitzer });
  writeFileSync(
    stackFile,
    JSON.stringify({
      ...outputsFor(pitzerResolved),
      scratch: { ...sampleOutputs.scratch, cacheDirs: { hcrl_sa: '/s/cache/hcrl_sa' } },
    }),
  );
  const spec = (name: string, text: string) => {
    const file = join(dir, name);
    writeFileSync(file, text);
    return file;
  };

  it('account: -rf', async () => {
    const file = spec('rf.yaml', pitzer.replace(/^account: .*$/m, 'account: -rf'));
    const line = pitzer.split('\n').findIndex((l) => l.startsWith('account:')) + 1;
    const r = await run(['plan', '--spec', file, '--stack-outputs', stackFile]);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`${file}:${line}:`);
    expect(r.err).toMatch(
      /account: "-rf" is not valid here \(expected a SLURM account such as PAS1266, found "-rf"\)/,
    );
  });

  it('a staging dataset the stack has no cache dir for', async () => {
    const file = spec(
      'staging.yaml',
      pitzer.replace(/datasets: \[hcrl_sa\]/, 'datasets: [hcrl_sa, car_hacking]'),
    );
    const line = pitzer.split('\n').findIndex((l) => /datasets: \[hcrl_sa\]/.test(l)) + 1;
    const r = await run(['plan', '--spec', file, '--stack', 'osc-pitzer', '--stack-outputs', stackFile]);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain(`${file}:${line}:`);
    expect(r.err).toMatch(
      /staging\.datasets\[1\]: stack osc-pitzer has no cache dir for dataset "car_hacking"/,
    );
    expect(r.out).not.toMatch(/rendered/);
  });

  it('a sweep value the pipeline refuses (checked once, when the spec loads)', async () => {
    const file = spec(
      'sweep.yaml',
      `${pitzer.trimEnd()}\nsweep:\n  grid:\n    training.max_epochs: [2, two]\n`,
    );
    const r = await run(['plan', '--spec', file, '--stack-outputs', stackFile]);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain(`${file}:`);
    expect(r.err).toMatch(
      /sweep\.grid\.training\.max_epochs: training\.max_epochs = "two" is not valid for the pipeline/,
    );
    expect(r.out).not.toMatch(/rendered/);
  });
});

describe("the active-run check when an earlier run's scheduler does not answer", () => {
  it('train --scheduler local names the earlier SLURM run, exits 3 and queues nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runner-cli-active-'));
    const specFile = resolve(import.meta.dirname, '../../../../examples/quickstart.yaml');
    const { resolved } = loadExperimentSpec(specFile);
    const runsDir = join(dir, 'runs');
    const outputs = {
      ...sampleOutputs,
      environments: [
        {
          ...sampleOutputs.environments[0]!,
          specHash: environmentSpecHash(environmentPresets['cpu-local']),
        },
      ],
      scratch: { ...sampleOutputs.scratch, cacheDirs: { synth: join(dir, 'cache/synth') }, runsDir },
    };
    const stackFile = join(dir, 'stack.json');
    writeFileSync(stackFile, JSON.stringify(outputs));
    // An earlier run of the same spec, submitted to a SLURM that cannot be reached now.
    const earlier = join(runsDir, 'quickstart', `20260101T000000Z-${resolved.specHash.slice(0, 8)}`);
    mkdirSync(earlier, { recursive: true });
    const manifest = {
      version: 1,
      experiment: 'quickstart',
      runDir: earlier,
      spec: { file: specFile, text: '', hash: resolved.specHash },
      resolved: { stages: [] },
      stack: { name: 'local', source: 'file', outputs },
      scheduler: 'slurm',
      jobs: [{ key: 'preprocess', stageId: 'preprocess', runRoot: join(earlier, 'outputs'), jobId: '41' }],
      submission: { status: 'submitted' },
    };
    writeFileSync(join(earlier, 'manifest.json'), JSON.stringify(manifest));
    const path = process.env['PATH'];
    process.env['PATH'] = join(dir, 'no-slurm-here'); // squeue, scontrol: not found
    let r;
    try {
      r = await run(['train', '--spec', specFile, '--scheduler', 'local', '--stack-outputs', stackFile]);
    } finally {
      process.env['PATH'] = path;
    }
    expect(r.code, r.err).toBe(3);
    expect(r.err).toContain(
      `cannot tell whether the earlier run ${earlier} of this spec is still queued or running`,
    );
    expect(r.err).toMatch(/submitted to SLURM \(stack local\), which did not answer/);
    expect(r.err).toMatch(/scripts\/slurm-local\.sh up.*or pass --force/);
    expect(readdirSync(join(runsDir, 'quickstart'))).toEqual([basename(earlier)]);
  });

  it('train --dry-run is a plan: rendered and preflighted, nothing submitted', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runner-cli-dry-'));
    const specFile = resolve(import.meta.dirname, '../../../../examples/quickstart.yaml');
    const stackFile = join(dir, 'stack.json');
    writeFileSync(
      stackFile,
      JSON.stringify({
        ...sampleOutputs,
        environments: [
          {
            ...sampleOutputs.environments[0]!,
            specHash: environmentSpecHash(environmentPresets['cpu-local']),
          },
        ],
        scratch: {
          ...sampleOutputs.scratch,
          cacheDirs: { synth: join(dir, 'cache/synth') },
          runsDir: join(dir, 'runs'),
        },
      }),
    );
    const r = await run(['train', '--dry-run', '--spec', specFile, '--stack-outputs', stackFile]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^plan: quickstart /m);
    expect(r.out).toMatch(/nothing submitted \(plan\)\./);
    const [runDir] = readdirSync(join(dir, 'runs', 'quickstart'));
    const manifest = JSON.parse(
      readFileSync(join(dir, 'runs', 'quickstart', runDir!, 'manifest.json'), 'utf8'),
    );
    expect(manifest.submission.status).toBe('planned');
    expect(manifest.jobs.every((j: { jobId?: string }) => j.jobId === undefined)).toBe(true);
  });
});
