// A hyperparameter study end to end on the repository's one-node SLURM with the real pipeline on
// synthetic data: `runner tune` queues preprocess, then a 2-worker array on one Optuna study of 8
// trials; one worker is killed (SIGKILL, as a node failure would) in the middle of a trial; the other
// fails the lost trial once its heartbeat is stale, retries it, and finishes the study. The report's
// figures are checked against the study's own journal, and `train --from-study --best` trains the
// winner. Run by scripts/test.sh after the local SLURM is up.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

const repo = resolve(import.meta.dirname, '../..');
const env = { ...process.env, KD_GAT_DATA_ROOT: process.env['KD_GAT_DATA_ROOT'] ?? join(repo, '.hpc/data/raw') };
const MIN_RESOURCE = 2;

function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { cwd: repo, encoding: 'utf8', timeout: 900_000, env });
  const out = `${r.stdout}${r.stderr}`;
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} failed:\n${out.slice(-4000)}`);
  return out;
}

const runner = (...args: string[]) =>
  run('scripts/with-toolchain.sh', ['node', 'apps/runner/bin/kdgat-runner.js', ...args, '--stack', 'local']);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface JournalTrial {
  number: number;
  state: 'WAITING' | 'RUNNING' | 'COMPLETE' | 'PRUNED' | 'FAIL';
  params: Record<string, unknown>;
  steps: number[];
  system: Record<string, unknown>;
  user: Record<string, unknown>;
}

const STATES = ['RUNNING', 'COMPLETE', 'PRUNED', 'FAIL', 'WAITING'] as const; // optuna's TrialState values

/**
 * The study's own records: journal.log replayed by hand (op codes of optuna's JournalOperation),
 * independent of the report's code. A finished trial takes no more updates, as in Optuna.
 */
function replay(journal: string): JournalTrial[] {
  const trials: JournalTrial[] = [];
  for (const line of readFileSync(journal, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const log = JSON.parse(line) as Record<string, unknown> & { op_code: number; trial_id?: number };
    const t = log.trial_id === undefined ? undefined : trials[log.trial_id];
    const open = t !== undefined && (t.state === 'RUNNING' || t.state === 'WAITING');
    switch (log.op_code) {
      case 4: {
        const state = typeof log['state'] === 'number' ? STATES[log['state']]! : 'RUNNING';
        const params: Record<string, unknown> = {};
        trials.push({ number: trials.length, state, params, steps: [], system: {}, user: { ...(log['user_attrs'] as object) } });
        break;
      }
      case 5:
        if (open) t.params[log['param_name'] as string] = log['param_value_internal'];
        break;
      case 6: {
        const next = STATES[log['state'] as number]!;
        if (open && !(next === 'RUNNING' && t.state === 'RUNNING')) t.state = next;
        break;
      }
      case 7:
        if (open) t.steps.push(log['step'] as number);
        break;
      case 8:
        if (open) Object.assign(t.user, log['user_attr']);
        break;
      case 9:
        if (open) Object.assign(t.system, log['system_attr']);
        break;
    }
  }
  return trials;
}

test('a 2-worker study on SLURM survives a killed worker; report and --from-study --best agree with the journal', async () => {
  // The synthetic data set and the provisioned local stack (both also made by `npm run quickstart`).
  if (!existsSync(join(env.KD_GAT_DATA_ROOT, 'synth')))
    run('python/.venv/bin/python', ['-m', 'kdgat', 'synth', '--out', join(env.KD_GAT_DATA_ROOT, 'synth'), '--messages', '120000']);
  run('scripts/with-toolchain.sh', ['nx', 'run', 'infra:up', '--stack', 'local', '--outputStyle=stream']);

  const study = `tune-e2e-${Date.now()}`;
  const specFile = join(mkdtempSync(join(tmpdir(), 'kdgat-tune-')), 'tune.yaml');
  writeFileSync(specFile, readFileSync(join(repo, 'examples/tune-vgae.yaml'), 'utf8').replace(/^name: .*$/m, `name: ${study}`));

  const out = runner('tune', '--spec', specFile, '--scheduler', 'slurm');
  const runDir = /run dir: (\S+)/.exec(out)?.[1];
  assert.ok(runDir, out);
  assert.match(out, /autoencoder: array of 2 tune workers on study tune-e2e-/);
  const manifest = JSON.parse(readFileSync(join(runDir, 'manifest.json'), 'utf8')) as {
    jobs: { key: string; jobId: string }[];
    tune: { study: string; studyDir: string };
  };
  assert.equal(manifest.tune.study, study);
  const arrayJob = manifest.jobs.find((j) => j.key === 'autoencoder')!.jobId;
  const journal = join(manifest.tune.studyDir, 'journal.log');

  // Kill worker 1 once it has finished a trial and has launched the next (values sampled, run root
  // set) with at most one epoch done. An epoch of this spec takes about half a second, so the journal
  // is read every 100 ms: at one read a second a trial pruned at its second epoch could start and end
  // between two reads, and the study could finish without a chance to kill (seen once on CI).
  const ofWorker1 = (t: JournalTrial) => String(t.system['kdgat_worker']).endsWith('_1');
  const launched = (t: JournalTrial) =>
    t.state === 'RUNNING' && t.user['run_root'] !== undefined && t.steps.length <= 1;
  let victim: JournalTrial | undefined;
  for (const deadline = Date.now() + 400_000; Date.now() < deadline && !victim; ) {
    await sleep(100);
    if (!existsSync(journal)) continue;
    const trials = replay(journal);
    if (trials.some((t) => ofWorker1(t) && (t.state === 'COMPLETE' || t.state === 'PRUNED')))
      victim = trials.find((t) => ofWorker1(t) && launched(t));
  }
  // On one line, so that the summary of a failed suite shows the study's state.
  const summary = () =>
    existsSync(journal)
      ? replay(journal)
          .map((t) => `#${t.number} ${String(t.system['kdgat_worker'])} ${t.state} steps ${t.steps.length}`)
          .join('; ')
      : 'no journal';
  assert.ok(victim, `worker 1 never ran a second trial: ${summary()}`);
  run('scancel', ['--signal=KILL', '--full', `${arrayJob}_1`]);

  for (let i = 0; i < 600; i++) {
    await sleep(1000);
    const q = spawnSync('squeue', ['-h', '-j', arrayJob], { encoding: 'utf8' });
    if (q.status === 0 && q.stdout.trim() === '') break;
  }
  const trials = replay(journal);
  const count = (s: JournalTrial['state']) => trials.filter((t) => t.state === s).length;

  // The study is consistent: nothing RUNNING, the lost trial failed as stale and retried with its values.
  assert.equal(count('RUNNING'), 0, 'no trial may stay RUNNING');
  const lost = trials[victim.number]!;
  assert.equal(lost.state, 'FAIL', `trial ${victim.number} was to be lost: ${summary()}`);
  assert.equal(lost.system['kdgat_stale'], true);
  const retry = trials.find((t) => t.user['kdgat_retry_of'] === victim.number);
  assert.ok(retry, 'the lost trial was retried');
  assert.deepEqual(retry.params, lost.params);
  assert.ok(retry.state === 'COMPLETE' || retry.state === 'PRUNED', `retry ended ${retry.state}`);
  // 8 trials finished (a worker may start one more while another finishes the 8th).
  const finished = count('COMPLETE') + count('PRUNED');
  assert.ok(finished >= 8 && finished <= 9, `${finished} finished trials`);
  // Both workers ran trials; the pruner pruned, never before min_resource epochs.
  const workers = new Set(trials.map((t) => String(t.system['kdgat_worker']).replace(/^.*_/, '')));
  assert.deepEqual([...workers].sort(), ['0', '1']);
  const pruned = trials.filter((t) => t.state === 'PRUNED');
  assert.ok(pruned.length >= 1, 'the pruner pruned at least one trial');
  for (const t of pruned) assert.ok(Math.max(...t.steps) >= MIN_RESOURCE, `trial ${t.number} pruned at ${Math.max(...t.steps)}`);

  // The report's figures are the journal's.
  const report = JSON.parse(runner('tune-report', '--study', study, '--json').replace(/^[^{]*/, '')) as {
    counts: Record<string, number>;
    pruning_rate: number;
    stale_failures: number;
    retries: number;
    pruned_before_min_resource: number;
    best: { number: number; value: number; params: Record<string, number> };
    plots: string[];
  };
  for (const s of ['COMPLETE', 'PRUNED', 'FAIL', 'RUNNING', 'WAITING'] as const) assert.equal(report.counts[s], count(s), s);
  assert.equal(report.pruning_rate, count('PRUNED') / finished);
  assert.equal(report.stale_failures, trials.filter((t) => t.system['kdgat_stale'] === true && t.state === 'FAIL').length);
  assert.equal(report.retries, trials.filter((t) => t.user['kdgat_retry_of'] !== undefined).length);
  assert.ok(report.retries >= 1);
  assert.equal(report.pruned_before_min_resource, 0);
  assert.equal(report.plots.length, 2);
  for (const p of report.plots) assert.ok(readFileSync(p).subarray(1, 4).toString() === 'PNG', p);

  // The best trial becomes a normal training run whose manifest points at the study.
  const trained = runner('train', '--spec', specFile, '--from-study', study, '--best', '--scheduler', 'slurm', '--wait');
  assert.match(trained, new RegExp(`best trial ${report.best.number} of study ${study}`));
  assert.match(trained, /autoencoder\s+\d+\s+COMPLETED\s+0:0/);
  const trainDir = /run dir: (\S+)/.exec(trained)![1]!;
  const m = JSON.parse(readFileSync(join(trainDir, 'manifest.json'), 'utf8')) as {
    fromStudy: { study: string; trial: number; params: Record<string, number> };
    resolved: { stages: { id: string; overrides: Record<string, unknown> }[]; tune?: unknown };
    jobs: { key: string; runRoot: string }[];
  };
  assert.equal(m.fromStudy.study, study);
  assert.equal(m.fromStudy.trial, report.best.number);
  assert.equal(m.resolved.tune, undefined);
  const overrides = m.resolved.stages.find((s) => s.id === 'autoencoder')!.overrides;
  for (const [k, v] of Object.entries(report.best.params)) assert.equal(overrides[k], v, k);
  const metrics = JSON.parse(
    readFileSync(join(m.jobs.find((j) => j.key === 'autoencoder')!.runRoot, 'synth/vgae_small_autoencoder/metrics.json'), 'utf8'),
  ) as { status: string; epochs: number };
  assert.equal(metrics.status, 'complete');
});
