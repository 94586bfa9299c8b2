// `kdgat-runner` end to end on the real one-node SLURM: spec → stack outputs → scripts →
// preflight → sbatch → manifest → --wait summary.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { readManifest, type Manifest } from '@kdgat/run-record';
import { jobStanding, makeSite, runDirOf, scontrolJob, squeueIds, type Site } from './harness.ts';
import { WAIT_MS, waitFor } from './helpers.ts';
import { specYaml } from './specs.ts';

describe('train on SLURM', () => {
  let site: Site;
  beforeAll(() => {
    site = makeSite();
  });

  it('runs a two-stage chain in dependency order and summarises it', async () => {
    const spec = site.spec(
      'chain',
      specYaml({
        name: 'e2e-chain',
        stages: [
          { id: 'autoencoder', stage: 'autoencoder', model: 'vgae', overrides: { 'training.max_epochs': 2 } },
          {
            id: 'curriculum',
            stage: 'curriculum',
            dependsOn: ['autoencoder'],
            overrides: { 'training.max_epochs': 3 },
          },
        ],
      }),
    );
    const r = await site.cli(['train', ...site.specArgs(spec), '--wait']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const runDir = runDirOf(r.out);
    const m = readManifest(runDir);
    const [ae, cur] = m.jobs;
    expect(cur!.dependsOn).toEqual(['autoencoder']);
    // Dependency order: the curriculum's metrics were written after the autoencoder's.
    const aeMetrics = join(ae!.runRoot, 'synth', 'vgae_small_autoencoder', 'metrics.json');
    const curMetrics = join(cur!.runRoot, 'synth', 'gat_small_curriculum', 'metrics.json');
    expect(JSON.parse(readFileSync(curMetrics, 'utf8')).epochs).toBe(3);
    const scontrol = scontrolJob(cur!.jobId!);
    expect(scontrol).toMatch(/JobState=COMPLETED/);
    const { mtimeMs: a } = await import('node:fs').then((fs) => fs.statSync(aeMetrics));
    const { mtimeMs: b } = await import('node:fs').then((fs) => fs.statSync(curMetrics));
    expect(b).toBeGreaterThan(a);
    // The summary table: both jobs COMPLETED with their metrics.
    expect(r.out).toMatch(/autoencoder\s+\d+\s+COMPLETED\s+0:0\s+\S+\s+epochs=2/);
    expect(r.out).toMatch(/curriculum\s+\d+\s+COMPLETED\s+0:0\s+\S+\s+epochs=3/);
    expect(m.git.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(Object.keys(m.scripts)).toEqual(['scripts/autoencoder.sbatch', 'scripts/curriculum.sbatch']);
  });

  it('turns a 3-point sweep into one array of 3 tasks, each with its own overrides and metrics', async () => {
    const spec = site.spec(
      'sweep',
      specYaml({
        name: 'e2e-sweep',
        stages: [{ id: 'train', stage: 'curriculum', overrides: { 'training.max_epochs': 1 } }],
        sweep: { 'training.lr': [0.1, 0.01, 0.001] },
      }),
    );
    const r = await site.cli(['train', ...site.specArgs(spec), '--wait']);
    expect(r.code, r.err).toBe(0);
    const m = readManifest(runDirOf(r.out));
    expect(m.jobs).toHaveLength(1);
    const job = m.jobs[0]!;
    expect(job.array).toEqual({ size: 3, concurrency: 3, firstPoint: 0 });
    expect(m.arrayIndex['train']).toEqual({
      '0': { 'training.lr': 0.1 },
      '1': { 'training.lr': 0.01 },
      '2': { 'training.lr': 0.001 },
    });
    const states = scontrolJob(job.jobId!).split('\n');
    expect(states).toHaveLength(3);
    for (const line of states) expect(line).toMatch(/JobState=COMPLETED/);
    for (const [i, lr] of [0.1, 0.01, 0.001].entries()) {
      const metrics = JSON.parse(
        readFileSync(
          join(job.runRoot, `point_${i}`, 'synth', 'gat_small_curriculum', 'metrics.json'),
          'utf8',
        ),
      );
      expect(Number(metrics.overrides['training.lr'])).toBe(lr);
    }
    expect(r.out).toMatch(/train\[2\]\s+\d+\s+COMPLETED/);
  });

  it('cancel cancels a queued run', async () => {
    const spec = site.spec(
      'cancel',
      specYaml({
        name: 'e2e-cancel',
        stages: [
          {
            id: 'slow',
            stage: 'autoencoder',
            model: 'vgae',
            overrides: { 'training.max_epochs': 100 },
          },
          { id: 'after', stage: 'curriculum', dependsOn: ['slow'] },
        ],
      }),
    );
    const r = await site.cli(['train', ...site.specArgs(spec)]);
    expect(r.code, r.err).toBe(0);
    const runDir = runDirOf(r.out);
    const ids = readManifest(runDir).jobs.map((j) => j.jobId!);
    expect(squeueIds()).toEqual(expect.arrayContaining(ids));
    const c = await site.cli(['cancel', runDir]);
    expect(c.code, c.err).toBe(0);
    expect(c.out).toContain(`cancelled ${ids.join(', ')}`);
    await waitFor(
      `squeue to drop the cancelled jobs ${ids.join(', ')}`,
      () => squeueIds().filter((id) => ids.includes(id)),
      (left) => left.length === 0,
      { describe: (left) => `still in squeue: ${left.join(', ')}` },
    );
    const s = await site.cli(['status', runDir]);
    expect(s.out).toMatch(/slow \[\d+\] CANCELLED/);
    expect(s.out).toMatch(/after \[\d+\] CANCELLED/);
  });

  it('an invalid spec submits nothing', async () => {
    const before = squeueIds();
    const file = join(site.root, 'invalid.yaml');
    await import('node:fs').then((fs) =>
      fs.writeFileSync(
        file,
        specYaml({ name: 'e2e-invalid', stages: [{ id: 'x', stage: 'curriculum' }] }).replace(
          'scale: small',
          'scale: gigantic',
        ),
      ),
    );
    const r = await site.cli([
      'train',
      '--spec',
      file,
      '--stack-outputs',
      site.stackFile,
      '--scheduler',
      'slurm',
    ]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/the spec is invalid; nothing was submitted/);
    expect(r.err).toMatch(/scale/);
    expect(r.err).toMatch(/gigantic/);
    expect(squeueIds()).toEqual(before);
  });

  it('preflight refuses an over-limit request with the scheduler reason, and queues nothing', async () => {
    const before = squeueIds();
    const spec = site.spec(
      'big',
      // Within the local profile's ceiling (64 cores), beyond this machine's node: only SLURM knows.
      specYaml({ name: 'e2e-big', stages: [{ id: 'x', stage: 'curriculum', cpus: 48 }] }),
    );
    const r = await site.cli(['train', ...site.specArgs(spec)]);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/preflight refused 1 of 1 job\(s\); nothing was submitted/);
    expect(r.err).toMatch(/Requested node configuration is not available/);
    expect(squeueIds()).toEqual(before);
  });

  it('a second train of a queued spec is refused with its job ids; two at once submit once', async () => {
    const spec = site.spec(
      'idem',
      specYaml({
        name: 'e2e-idem',
        stages: [
          {
            id: 'x',
            stage: 'autoencoder',
            model: 'vgae',
            overrides: { 'training.max_epochs': 100 },
          },
        ],
      }),
    );
    const [a, b] = await Promise.all([
      site.cli(['train', ...site.specArgs(spec)]),
      site.cli(['train', ...site.specArgs(spec)]),
    ]);
    const ok = [a, b].filter((r) => r.code === 0);
    const refused = [a, b].filter((r) => r.code === 3);
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(1);
    const runDir = runDirOf(ok[0]!.out);
    const id = readManifest(runDir).jobs[0]!.jobId!;
    expect(refused[0]!.err).toMatch(/already queued or running; not submitting again \(use --force/);
    expect(refused[0]!.err).toContain(`job ids ${id}`);
    const forced = await site.cli(['train', ...site.specArgs(spec), '--force']);
    expect(forced.code, forced.err).toBe(0);
    await site.cli(['cancel', runDir]);
    await site.cli(['cancel', runDirOf(forced.out)]);
  });

  it(
    'preemption: signalled job checkpoints, acknowledges, is requeued, resumes and completes all epochs',
    async () => {
      const spec = site.spec(
        'preempt',
        specYaml({
          name: 'e2e-preempt',
          stages: [
            {
              id: 'train',
              stage: 'curriculum',
              overrides: { 'training.max_epochs': 6 },
            },
          ],
          requeue: { leadSeconds: 60, maxRestarts: 2 },
        }),
      );
      const r = await site.cli(['train', ...site.specArgs(spec)]);
      expect(r.code, r.err).toBe(0);
      const runDir = runDirOf(r.out);
      const m: Manifest = readManifest(runDir);
      const job = m.jobs[0]!;
      const runLeaf = join(job.runRoot, 'synth', 'gat_small_curriculum');
      // Signal once the pipeline has trained an epoch.
      const checkpoint = join(runLeaf, 'checkpoints', 'last.ckpt');
      await waitFor(
        `the first epoch's checkpoint ${checkpoint}`,
        () => ({ written: existsSync(checkpoint), job: scontrolJob(job.jobId!) }),
        (seen) => seen.written,
        { describe: (seen) => `not written yet; ${jobStanding(seen.job)}` },
      );
      const sig = spawnSync('scancel', ['--signal=USR1', '--batch', job.jobId!], { encoding: 'utf8' });
      expect(sig.status, sig.stderr).toBe(0);
      // SLURM holds a requeued batch job for ~2 minutes (BeginTime); as the cluster admin, release
      // it now so the test does not wait. The requeue itself is the job script's doing.
      await waitFor(
        `job ${job.jobId} to be requeued (Restarts=1, PENDING)`,
        () => scontrolJob(job.jobId!),
        (out) => /Restarts=1/.test(out) && /JobState=PENDING/.test(out),
        { describe: jobStanding },
      );
      expect(spawnSync('scontrol', ['update', `JobId=${job.jobId}`, 'StartTime=now']).status).toBe(0);
      const done = await waitFor(
        `requeued job ${job.jobId} to complete`,
        () => scontrolJob(job.jobId!),
        (out) => /JobState=COMPLETED/.test(out),
        // A loaded 2-core runner has taken over 150 s here; a quiet one about 10 s.
        { describe: jobStanding, timeoutMs: 2 * WAIT_MS },
      );
      expect(done).toMatch(/Restarts=1/);
      const ack = JSON.parse(readFileSync(join(runLeaf, 'requeue_ack.json'), 'utf8'));
      expect(ack.epoch).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(readFileSync(join(runLeaf, 'metrics.json'), 'utf8')).epochs).toBe(6);
      const logs = readdirSync(join(runDir, 'logs'))
        .map((f) => readFileSync(join(runDir, 'logs', f), 'utf8'))
        .join('\n');
      expect(logs).toMatch(/checkpoint acknowledged; requeueing job/);
      expect(logs).toMatch(/resuming from .*last\.ckpt at epoch/);
      const s = await site.cli(['status', runDir]);
      expect(s.out).toMatch(/PREEMPTED_REQUEUED: .*requeued 1 time\(s\)/);
    },
    5 * WAIT_MS,
  ); // four waits in a row, each with its own deadline and message: this is only the backstop

  it('--from-manifest re-renders byte-identical scripts', async () => {
    const spec = site.spec(
      'repro',
      specYaml({
        name: 'e2e-repro',
        stages: [
          { id: 'a', stage: 'autoencoder', model: 'vgae' },
          { id: 'b', stage: 'curriculum', dependsOn: ['a'] },
        ],
        sweep: { 'training.lr': [0.1, 0.2] },
      }),
    );
    const first = await site.cli(['train', ...site.specArgs(spec), '--wait']);
    expect(first.code, first.err).toBe(0);
    const runDir = runDirOf(first.out);
    const again = await site.cli(['plan', '--from-manifest', runDir, '--stack-outputs', site.stackFile]);
    expect(again.code, again.err).toBe(0);
    expect(again.out).toContain(
      `reproduced from ${runDir}: re-rendered scripts are byte-identical to the recorded ones`,
    );
    const second = readManifest(runDirOf(again.out));
    const original = readManifest(runDir);
    const rel = (m: Manifest, f: string) =>
      readFileSync(join(m.runDir, f), 'utf8').split(m.runDir).join('<run>');
    for (const f of Object.keys(original.scripts)) expect(rel(second, f)).toBe(rel(original, f));
  });
});
