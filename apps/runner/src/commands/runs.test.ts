// `runner runs`, `runner tensorboard` and `runner sync` on a local stack: the arguments each refuses
// before anything is read, the catalogue read by the pipeline's own reader (this checkout's python),
// the log dir TensorBoard is given (and what `--serve` starts: a stub python here), and the
// tracking-sync command run in the environment the stack outputs activate (a stub python on PATH).
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { sampleOutputs } from '@kdgat/planning/testing';
import type { StackOutputs } from '@kdgat/planning';
import { afterEach, describe, expect, it } from 'vitest';
import { run } from '../cli/run-in-process.test-support.ts';
import { REPO_ROOT } from './kit.ts';

const PIPELINE_PYTHON = join(REPO_ROOT, 'python', '.venv', 'bin', 'python');

/** A local stack whose runs dir holds one run of a 3-point sweep; its stack outputs file. */
function site(activate = 'true') {
  const root = mkdtempSync(join(tmpdir(), 'kdgat-runs-unit-'));
  const runsDir = join(root, 'runs');
  const outputs: StackOutputs = {
    ...sampleOutputs,
    environments: [{ ...sampleOutputs.environments[0]!, activate }],
    scratch: { ...sampleOutputs.scratch, root, runsDir },
  };
  const stackFile = join(root, 'outputs.json');
  writeFileSync(stackFile, JSON.stringify(outputs));
  const runDir = join(runsDir, 'e2e-sweep', '20261125T120000Z-abcdef12');
  mkdirSync(runDir, { recursive: true });
  const manifest = {
    version: 1,
    experiment: 'e2e-sweep',
    runDir,
    createdAt: '2026-11-25T12:00:00Z',
    spec: { file: 'x.yaml', text: '', hash: 'f'.repeat(64) },
    resolved: {
      stages: [{ id: 'cur', stage: 'curriculum', model: 'gat', scale: 'small', dataset: 'synth' }],
    },
    git: { commit: 'c0ffee', dirty: false },
    code: { tree: 't', commit: 'c0ffee', dir: join(root, 'code', 't'), dirty: false },
    environment: { name: 'cpu-local', specHash: '', lockHash: 'l0ck', lockPath: '' },
    stack: { name: 'local', source: 'file', outputs },
    scheduler: 'local',
    scripts: {},
    jobs: [
      {
        key: 'cur',
        name: 'cur',
        stageId: 'cur',
        script: 's',
        dependsOn: [],
        runRoot: join(runDir, 'outputs'),
      },
    ],
    arrayIndex: {},
    submission: { status: 'submitted' },
  };
  writeFileSync(join(runDir, 'manifest.json'), JSON.stringify(manifest));
  const stageDir = (p: number) => join(runDir, 'outputs', `point_${p}`, 'synth', 'gat_small_curriculum');
  return { root, runsDir, runDir, stackFile, stageDir, args: ['--stack-outputs', stackFile] };
}

/** Rows as the pipeline writes them: `python -m kdgat catalogue-append` after a metrics.json. */
function finish(stageDir: string, f1: number, state = 'COMPLETED') {
  mkdirSync(stageDir, { recursive: true });
  writeFileSync(join(stageDir, 'metrics.json'), JSON.stringify({ stage: 'curriculum', scores: { f1 } }));
  const r = spawnSync(
    PIPELINE_PYTHON,
    [
      '-m',
      'kdgat',
      'catalogue-append',
      '--stage-dir',
      stageDir,
      '--state',
      state,
      '--recorded-by',
      'pipeline',
    ],
    { encoding: 'utf8', env: { ...process.env, PYTHONPATH: '' } },
  );
  expect(r.status, r.stderr).toBe(0);
}

const saved = { python: process.env['HPC_PYTHON'] };
afterEach(() => {
  if (saved.python === undefined) delete process.env['HPC_PYTHON'];
  else process.env['HPC_PYTHON'] = saved.python;
});

/** A stub python that records its argv (and PYTHONPATH) and answers like the pipeline would. */
function stubPython(dir: string, body = 'exit 0'): string {
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  const path = join(bin, 'python');
  writeFileSync(
    path,
    `#!/bin/bash\nprintf '%s\\n' "$@" >>"${dir}/python.argv"\nprintf '%s\\n' "\${PYTHONPATH:-}" >"${dir}/python.pythonpath"\n${body}\n`,
    { mode: 0o755 },
  );
  return path;
}

describe('runner runs', () => {
  it('refuses a run directory and empty options before reading the stack', async () => {
    expect(await run(['runs', '/some/run'])).toMatchObject({ code: 2 });
    expect((await run(['runs', '/some/run'])).err).toContain('runs takes no run directory (/some/run)');
    expect((await run(['runs', '--where', ' '])).err).toContain('--where is empty');
  });

  it("prints the stack's catalogue: filtered, sorted, as JSON; a bad --where is the pipeline's refusal (exit 2)", async () => {
    process.env['HPC_PYTHON'] = PIPELINE_PYTHON;
    const s = site();
    [0.5, 0.9, 0.7].forEach((f1, p) => finish(s.stageDir(p), f1));
    const table = await run(['runs', ...s.args, '--where', 'f1>0.6', '--sort', 'f1:desc']);
    expect(table.code, table.err).toBe(0);
    const lines = table.out.trimEnd().split('\n');
    expect(lines[0]).toBe(`catalogue ${join(s.runsDir, 'catalogue')}: 2 row(s) matching f1>0.6`);
    expect(lines.slice(2).map((l) => l.split(/\s+/)[3])).toEqual(['1', '2']); // point_index, best F1 first
    const json = await run(['runs', ...s.args, '--json', '--columns', 'experiment,point_index,f1,state']);
    expect(JSON.parse(json.out)).toEqual(
      [0.5, 0.9, 0.7].map((f1, p) => ({ experiment: 'e2e-sweep', point_index: p, f1, state: 'COMPLETED' })),
    );
    const bad = await run(['runs', ...s.args, '--where', 'f1>high']);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('f1 is a number');
  }, 30_000); // three runs of the real python (pyarrow, the query): seconds each on a loaded 2-core machine
});

describe('runner tensorboard', () => {
  it('refuses what it cannot serve before reading anything', async () => {
    expect((await run(['tensorboard'])).err).toContain('name the run: tensorboard RUN_DIR');
    expect((await run(['tensorboard', '/r', '--study', 's'])).err).toContain('not both');
    expect((await run(['tensorboard', '/r', '--port', '7000'])).err).toContain('--port goes with --serve');
    for (const port of ['0', '70000', '60a', '-1'])
      expect((await run(['tensorboard', '/r', '--serve', `--port=${port}`])).err).toContain(
        'expected a port number',
      );
  });

  it("prints the run's log dir and the stage runs in it, and serves it on 127.0.0.1 only", async () => {
    const s = site();
    for (const p of [0, 2]) {
      mkdirSync(join(s.stageDir(p), 'tensorboard'), { recursive: true });
      writeFileSync(join(s.stageDir(p), 'tensorboard', 'events.out.tfevents.1.host'), '');
    }
    mkdirSync(join(s.stageDir(1), 'checkpoints', 'tensorboard'), { recursive: true }); // not a stage's
    const r = await run(['tensorboard', s.runDir]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(`tensorboard log dir: ${s.runDir}\n`);
    expect(r.out).toContain(
      '2 stage run(s) with event files: outputs/point_0/synth/gat_small_curriculum/tensorboard, ' +
        'outputs/point_2/synth/gat_small_curriculum/tensorboard',
    );
    process.env['HPC_PYTHON'] = stubPython(s.root);
    const served = await run(['tensorboard', s.runDir, '--serve', '--port', '6123']);
    expect(served.code, served.err).toBe(0);
    expect(served.out).toContain('TensorBoard: http://127.0.0.1:6123/');
    const argv = readFileSync(join(s.root, 'python.argv'), 'utf8').trim().split('\n');
    expect(argv).toEqual([
      '-c',
      'import tensorboard', // the check before it starts
      '-m',
      'tensorboard.main',
      '--logdir',
      s.runDir,
      '--host',
      '127.0.0.1',
      '--port',
      '6123',
    ]);
  });

  it("names a study's log dir: its trials' stage runs", async () => {
    const s = site();
    const trial = join(
      s.runDir,
      'study',
      'trials',
      'trial_3',
      'synth',
      'gat_small_curriculum',
      'tensorboard',
    );
    mkdirSync(trial, { recursive: true });
    writeFileSync(join(s.runDir, 'study', 'study.json'), '{}');
    mkdirSync(join(s.runsDir, 'studies'));
    symlinkSync(join(s.runDir, 'study'), join(s.runsDir, 'studies', 'lr-search'));
    const r = await run(['tensorboard', '--study', 'lr-search', ...s.args]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(`tensorboard log dir: ${join(s.runDir, 'study')}\n`);
    expect(r.out).toContain(
      '1 stage run(s) with event files: trials/trial_3/synth/gat_small_curriculum/tensorboard',
    );
  });

  it('says what to install when the python has no tensorboard', async () => {
    const s = site();
    process.env['HPC_PYTHON'] = stubPython(s.root, 'exit 1');
    const r = await run(['tensorboard', s.runDir, '--serve']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('TensorBoard is not installed for');
    expect(r.err).toContain('npm run bootstrap');
  });
});

describe('runner sync', () => {
  it('refuses a missing run, another stack and a stage the run does not have', async () => {
    expect((await run(['sync'])).err).toContain('name the run: sync RUN_DIR');
    const s = site();
    expect((await run(['sync', s.runDir, '--stack', 'osc-pitzer'])).err).toContain('ran on stack local');
    expect((await run(['sync', s.runDir, '--stage', 'nope'])).err).toContain(
      '--stage nope: not a stage of the run',
    );
  });

  it("runs tracking-sync on the run dir in the run's environment, its code snapshot first on PYTHONPATH", async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-sync-unit-'));
    stubPython(root, 'echo "synced 2 offline runs"');
    const s = site(`export PATH=${join(root, 'bin')}:$PATH`);
    const r = await run(['sync', s.runDir, '--stack', 'local']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(
      `tracking-sync of ${s.runDir} on local (environment cpu-local):\nsynced 2 offline runs\n`,
    );
    expect(readFileSync(join(root, 'python.argv'), 'utf8').trim().split('\n')).toEqual([
      '-m',
      'kdgat',
      'tracking-sync',
      '--run-dir',
      s.runDir,
    ]);
    expect(readFileSync(join(root, 'python.pythonpath'), 'utf8').trim()).toMatch(
      new RegExp(`^${join(s.root, 'code', 't', 'src')}`),
    );
  });

  it('says so when tracking-sync fails (exit 1), with what it printed', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-sync-unit-'));
    stubPython(
      root,
      'echo "python -m kdgat: error: argument command: invalid choice: \'tracking-sync\'" >&2; exit 2',
    );
    const s = site(`export PATH=${join(root, 'bin')}:$PATH`);
    const r = await run(['sync', s.runDir]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("invalid choice: 'tracking-sync'");
    expect(r.err).toContain('tracking-sync on local exited with status 2');
  });
});
