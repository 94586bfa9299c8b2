// The main job end to end, as a user runs it: `npm run quickstart` (bootstrap, `pulumi up` of the
// local stack, the real KD-GAT pipeline on synthetic data through the runner). Asserts on what the
// user is shown and on the run's own files. Run by scripts/test.sh after the local SLURM is up.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { test } from 'node:test';

const repo = resolve(import.meta.dirname, '../..');

function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { cwd: repo, encoding: 'utf8', timeout: 900_000, env: process.env });
  const out = `${r.stdout}${r.stderr}`;
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} failed:\n${out.slice(-4000)}`);
  return out;
}

function manifestOf(out: string): { jobs: { key: string; runRoot: string }[]; scheduler: string } {
  const path = /manifest: (\S+manifest\.json)/.exec(out)?.[1];
  assert.ok(path, `no manifest path in:\n${out.slice(-2000)}`);
  return JSON.parse(readFileSync(path, 'utf8'));
}

function curriculumMetrics(manifest: { jobs: { key: string; runRoot: string }[] }): Record<string, unknown> {
  const job = manifest.jobs.find((j) => j.key === 'curriculum');
  assert.ok(job);
  return JSON.parse(readFileSync(join(job.runRoot, 'synth', 'gat_small_curriculum', 'metrics.json'), 'utf8'));
}

test('npm run quickstart provisions the local stack and trains the chain with the local scheduler', () => {
  const out = run('bash', ['scripts/quickstart.sh']);
  // bootstrap: one line per step; pulumi up: its summary, not every property of every resource
  assert.match(out, /^bootstrap: done in \d+s/m);
  assert.match(out, /pulumi up --stack local: the summary below; resource by resource: \S+pulumi-up-local\.log/);
  assert.match(out, /Outputs:/);
  assert.match(out, /Resources:/);
  assert.doesNotMatch(out, /\[urn=/);
  assert.match(out, /preprocess\s+\d+\s+COMPLETED\s+0:0/);
  assert.match(out, /autoencoder\s+\d+\s+COMPLETED\s+0:0/);
  assert.match(out, /curriculum\s+\d+\s+COMPLETED\s+0:0\s+\S+\s+epochs=5 f1=/);
  const manifest = manifestOf(out);
  assert.equal(manifest.scheduler, 'local');
  const m = curriculumMetrics(manifest) as { scores: { f1: number }; epochs: number; status: string };
  assert.equal(m.status, 'complete');
  assert.equal(m.epochs, 5);
  assert.ok(m.scores.f1 > 0.5, `F1 ${m.scores.f1} should be clearly above the trivial baseline (0)`);
  // The lock the real `pulumi up` exported travels with the run: copied in, named in the manifest.
  const run_ = manifest as unknown as { runDir: string; environment: { lockHash: string; lockFile?: string } };
  assert.equal(run_.environment.lockFile, 'environment.lock.txt');
  const lock = readFileSync(join(run_.runDir, run_.environment.lockFile));
  assert.ok(lock.length > 0);
  assert.equal(createHash('sha256').update(lock).digest('hex'), run_.environment.lockHash);
  // Where its TensorBoard logs are (`runner tensorboard <run dir>`), and its stages in the catalogue of
  // all runs (`runner runs --where run_id=<run>`): one row per stage, each COMPLETED.
  const logDirLine = `tensorboard log dir: ${run_.runDir}\n`;
  assert.ok(out.includes(logDirLine), `no "${logDirLine.trim()}" line in:\n${out.slice(-3000)}`);
  const runId = basename(run_.runDir);
  assert.match(out, new RegExp(`catalogue \\S+/catalogue: 3 row\\(s\\) matching run_id=${runId}`));
  for (const stage of ['preprocess', 'autoencoder', 'curriculum'])
    assert.match(out, new RegExp(`quickstart\\s+${runId}\\s+${stage}\\s+COMPLETED\\s`), `no row of ${stage}`);
});

// The same spec on the local SLURM is the examples suite's job (scripts/e2e-examples runs
// examples/quickstart.yaml there with the real pipeline); the afterok chain itself is asserted by the
// runner e2e suite (apps/runner/test/e2e). A second run of it here cost about 70 s of `npm test`.
