// `kdgat-runner train` with the local scheduler (the quickstart's default): the same flow,
// scripts run by bash on this machine.
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { readManifest, sha256 } from '@kdgat/run-record';
import { JOB_LIBRARY } from '@kdgat/slurm-templates';
import { makeSite, runDirOf, type Site } from './harness.ts';
import { specYaml } from './specs.ts';

describe('train with the local scheduler', () => {
  let site: Site;
  beforeAll(() => {
    site = makeSite();
  });
  const args = (spec: string) => ['--spec', spec, '--stack-outputs', site.stackFile, '--scheduler', 'local'];

  it('runs a chain and a sweep to completion and prints the summary', async () => {
    const spec = site.spec(
      'local-chain',
      specYaml({
        name: 'e2e-local',
        stages: [
          { id: 'autoencoder', stage: 'autoencoder', model: 'vgae', overrides: { 'training.max_epochs': 1 } },
          { id: 'curriculum', stage: 'curriculum', dependsOn: ['autoencoder'], overrides: { 'training.max_epochs': 2 } },
        ],
        sweep: { 'training.lr': [0.1, 0.01] },
      }),
    );
    const r = await site.cli(['train', ...args(spec), '--wait']);
    expect(r.code, r.err + r.out).toBe(0);
    expect(r.out).toMatch(/curriculum\[1\]\s+\d+\s+COMPLETED\s+0:0\s+\S+\s+epochs=2 f1=0\.8900/);
    const runDir = runDirOf(r.out);
    const m = readManifest(runDir);
    expect(m.scheduler).toBe('local');
    const cur = m.jobs.find((j) => j.key === 'curriculum')!;
    const metrics = JSON.parse(readFileSync(join(cur.runRoot, 'point_1', 'synth', 'gat_small_curriculum', 'metrics.json'), 'utf8'));
    expect(metrics.overrides['training.lr']).toBe('0.01');
    const logs = await site.cli(['logs', runDir, '--job', 'curriculum', '--index', '1']);
    expect(logs.out).toContain('kdgat: epoch 2/2 done');
  });

  it('a CUDA out-of-memory failure exits non-zero with the fix to try', async () => {
    const spec = site.spec(
      'local-oom',
      specYaml({ name: 'e2e-oom', stages: [{ id: 'train', stage: 'curriculum' }] }),
    );
    site.env['HPC_STANDIN_FAIL'] = 'cuda_oom'; // the stand-in fails like a CUDA OOM
    const r = await site.cli(['train', ...args(spec), '--wait']).finally(() => delete site.env['HPC_STANDIN_FAIL']);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/train\s+\d+\s+FAILED\s+1:0/);
    expect(r.out).toMatch(/train: CUDA_OOM: the GPU ran out of memory/);
    expect(r.out).toMatch(/fix: lower the batch size/);
  });

  it('refuses a stack provisioned from another environment spec', async () => {
    const spec = site.spec('local-env', specYaml({ name: 'e2e-env', stages: [{ id: 'x', stage: 'curriculum' }] }));
    const outputs = JSON.parse(readFileSync(site.stackFile, 'utf8'));
    outputs.environments[0].specHash = '0'.repeat(64);
    const other = join(site.root, 'other-stack.json');
    await import('node:fs').then((fs) => fs.writeFileSync(other, JSON.stringify(outputs)));
    const r = await site.cli(['train', '--spec', spec, '--stack', 'local', '--stack-outputs', other]);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/run `pulumi up` on stack local first/);
  });

  it('keeps the environment lock with the run; --from-manifest refuses a changed environment', async () => {
    const spec = site.spec(
      'local-lock',
      specYaml({ name: 'e2e-lock', stages: [{ id: 'train', stage: 'curriculum', overrides: { 'training.max_epochs': 1 } }] }),
    );
    const withLock = (name: string, lock: string) => {
      const outputs = JSON.parse(readFileSync(site.stackFile, 'utf8'));
      outputs.environments[0].lock = lock;
      outputs.environments[0].lockHash = sha256(lock);
      const file = join(site.root, name);
      writeFileSync(file, JSON.stringify(outputs));
      return file;
    };
    const lockV1 = 'numpy==2.3.1\ntorch==2.8.0\n';
    const first = await site.cli(['train', '--spec', spec, '--stack-outputs', withLock('lock-v1.json', lockV1), '--scheduler', 'local', '--wait']);
    expect(first.code, first.err + first.out).toBe(0);
    const runDir = runDirOf(first.out);
    expect(readManifest(runDir).environment).toMatchObject({ lockHash: sha256(lockV1), lockFile: 'environment.lock.txt' });
    expect(readFileSync(join(runDir, 'environment.lock.txt'), 'utf8')).toBe(lockV1);

    // A later `pulumi up` rebuilt the environment with another torch and one more package.
    const v2 = withLock('lock-v2.json', 'numpy==2.3.1\ntorch==2.8.1\noptuna==4.1.0\n');
    const refused = await site.cli(['train', '--from-manifest', runDir, '--stack-outputs', v2, '--scheduler', 'local']);
    expect(refused.code, refused.err + refused.out).toBe(3);
    expect(refused.err).toMatch(/environment cpu-local changed since the recorded run[\s\S]*nothing was submitted/);
    expect(refused.err).toContain('~ torch 2.8.0 -> 2.8.1');
    expect(refused.err).toContain('+ optuna 4.1.0');
    expect(refused.err).toContain('--allow-env-change');
    expect(readdirSync(join(site.runsDir, 'e2e-lock'))).toHaveLength(1); // nothing rendered, nothing queued

    const allowed = await site.cli(['train', '--from-manifest', runDir, '--stack-outputs', v2, '--scheduler', 'local', '--allow-env-change', '--wait']);
    expect(allowed.code, allowed.err + allowed.out).toBe(0);
    expect(allowed.out).toContain('~ torch 2.8.0 -> 2.8.1');
    const again = readManifest(runDirOf(allowed.out));
    expect(again.environment.changedFrom).toEqual({
      lockHash: sha256(lockV1),
      differences: ['~ torch 2.8.0 -> 2.8.1', '+ optuna 4.1.0'],
    });
    expect(again.submission.reproducedFrom).toBe(runDir);
  });

  it('a run recorded before the job library (its shell inline) reruns with --from-manifest, saying why the bytes differ', async () => {
    const spec = site.spec(
      'local-layout',
      specYaml({ name: 'e2e-layout', stages: [{ id: 'train', stage: 'curriculum', overrides: { 'training.max_epochs': 1 } }] }),
    );
    const first = await site.cli(['train', ...args(spec), '--wait']);
    expect(first.code, first.err + first.out).toBe(0);
    const runDir = runDirOf(first.out);
    // The site's outputs name no job library (a stack provisioned before it): the run carries its own.
    const m = readManifest(runDir);
    const lib = `scripts/lib/${JOB_LIBRARY.file}`;
    expect(m.jobLibrary).toEqual({ path: join(runDir, lib), sha256: JOB_LIBRARY.sha256, source: 'run', file: lib });
    expect(readFileSync(join(runDir, lib), 'utf8')).toBe(JOB_LIBRARY.text);
    expect(first.out).toContain(`the site has no job library installed (provisioned before it existed): this run carries its own, ${lib}`);
    const script = readFileSync(join(runDir, m.jobs[0]!.script), 'utf8');
    expect(script.split('\n').length).toBeLessThan(80);

    // A run made with this layout renders the very same bytes again.
    const same = await site.cli(['plan', '--from-manifest', runDir, '--stack-outputs', site.stackFile, '--scheduler', 'local']);
    expect(same.code, same.err + same.out).toBe(0);
    expect(same.out).toContain(`reproduced from ${runDir}: re-rendered scripts are byte-identical to the recorded ones`);

    // The same run as the older layout recorded it: each script its values, then the whole shell inline;
    // no job library in the manifest or the run dir.
    const inline = JOB_LIBRARY.text.split('\n').slice(1).join('\n');
    const scripts: Record<string, string> = {};
    for (const f of Object.keys(m.scripts)) {
      const text = readFileSync(join(runDir, f), 'utf8');
      const old = !f.endsWith('.tsv') ? text.slice(0, text.indexOf('# The shell every job shares')) + inline : text;
      writeFileSync(join(runDir, f), old);
      scripts[f] = sha256(old);
    }
    const { jobLibrary: _dropped, ...older } = { ...m, scripts };
    writeFileSync(join(runDir, 'manifest.json'), JSON.stringify(older, null, 2));
    rmSync(join(runDir, 'scripts', 'lib'), { recursive: true });

    const again = await site.cli(['train', '--from-manifest', runDir, '--stack-outputs', site.stackFile, '--scheduler', 'local', '--wait']);
    expect(again.code, again.err + again.out).toBe(0);
    expect(again.out).toContain(`reproduced from ${runDir}: re-rendered scripts DIFFER from the recorded ones: ${Object.keys(scripts).join(', ')}`);
    expect(again.out).toContain(
      "the recorded run's scripts were rendered by the older layout, each carrying the whole job shell inline; " +
        'the scripts rendered now hold only their #SBATCH lines and values and load the job library',
    );
    const rerun = readManifest(runDirOf(again.out));
    expect(rerun.submission.reproducedFrom).toBe(runDir);
    expect(rerun.jobLibrary?.sha256).toBe(JOB_LIBRARY.sha256);
    expect(existsSync(join(rerun.runDir, lib))).toBe(true);
    expect(again.out).toMatch(/train\s+\S+\s+COMPLETED/);
  });
});
