// `kdgat-runner train` with the local scheduler (the quickstart's default): the same flow,
// scripts run by bash on this machine.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { readManifest } from '../../src/manifest/manifest.ts';
import { makeSite, type Site } from './harness.ts';
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
    const runDir = /^run dir: (.+)$/m.exec(r.out)![1]!;
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
    site.env['KDGAT_STANDIN_FAIL'] = 'cuda_oom'; // the stand-in fails like a CUDA OOM
    const r = await site.cli(['train', ...args(spec), '--wait']).finally(() => delete site.env['KDGAT_STANDIN_FAIL']);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/train\s+\d+\s+FAILED\s+1:0/);
    expect(r.out).toMatch(/train: CUDA_OOM: the GPU ran out of memory/);
    expect(r.out).toMatch(/fix: lower the batch size/);
  });

  it('refuses a stack provisioned from another environment spec', async () => {
    const spec = site.spec('local-env', specYaml({ name: 'e2e-env', stages: [{ id: 'x', stage: 'curriculum' }] }));
    const outputs = JSON.parse(readFileSync(site.stackFile, 'utf8'));
    outputs.environment.specHash = '0'.repeat(64);
    const other = join(site.root, 'other-stack.json');
    await import('node:fs').then((fs) => fs.writeFileSync(other, JSON.stringify(outputs)));
    const r = await site.cli(['train', '--spec', spec, '--stack', 'local', '--stack-outputs', other]);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/run `pulumi up` on stack local first/);
  });
});
