// From the laptop to a site reachable only over SSH (site.ts): `infra:up` of the SSH stack through
// Pulumi, then the runner — train --wait, status, logs, report, a requeue, --from-manifest, cancel,
// and a --wait whose SSH master is killed halfway — with the pipeline's code arriving only as the
// run's snapshot. Needs root (namespaces) and the bootstrap; run by scripts/test.sh.
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, SCRATCH, startSite, type Run, type SshSite } from './site.ts';

let site: SshSite;

/** What a failed command said, for assertion messages. */
const said = (r: Run) =>
  `exit ${r.code}\n--- stdout\n${r.out.slice(-4000)}\n--- stderr\n${r.err.slice(-4000)}`;

function expectOk(r: Run): Run {
  expect(r.code, said(r)).toBe(0);
  return r;
}

/** The quickstart's chain, shrunk as the examples suite shrinks it (one epoch, one core). */
function chainSpec(name: string, epochs = 1): string {
  const stage = (id: string, stage: string, model: string, after?: string) =>
    [
      `  - id: ${id}`,
      `    stage: ${stage}`,
      `    model: ${model}`,
      '    scale: small',
      '    dataset: synth',
      ...(after ? [`    dependsOn: [${after}]`] : []),
      '    overrides:',
      `      training.max_epochs: ${epochs}`,
      '      data.num_workers: 0',
      '      training.patience: 0',
      '    resources: { cpus: 1, memGB: 3, gpus: { count: 0 }, time: "0:20:00" }',
    ].join('\n');
  return [
    `name: ${name}`,
    'cluster: local',
    'environment: cpu-local',
    'stages:',
    stage('preprocess', 'preprocess', 'gat'),
    stage('autoencoder', 'autoencoder', 'vgae', 'preprocess'),
    stage('curriculum', 'curriculum', 'gat', 'autoencoder'),
    '',
  ].join('\n');
}

function writeSpec(name: string, text: string): string {
  const file = join(site.dir, 'laptop', `${name}.yaml`);
  writeFileSync(file, text);
  return file;
}

const trainArgs = (spec: string) => ['train', '--spec', spec, '--stack', site.stack, '--scheduler', 'slurm'];

/** `run dir: SITE_PATH on the site; local copy: LOCAL` */
function runDirsOf(out: string): { site: string; local: string } {
  const m = /^run dir: (\S+) on the site; local copy: (\S+)$/m.exec(out);
  if (!m) throw new Error(`no "run dir: … on the site; local copy: …" line in:\n${out}`);
  return { site: m[1]!, local: m[2]! };
}

interface StatusJob {
  key: string;
  tasks: { state: string; restarts?: number }[];
}

async function statusOf(localRunDir: string): Promise<StatusJob[]> {
  const r = expectOk(await site.runner(['status', localRunDir, '--json']));
  return JSON.parse(r.out) as StatusJob[];
}

beforeAll(async () => {
  site = await startSite();
  // The laptop has no SLURM and no view of the site's files: the test cannot pass by accident.
  const sbatch = await site.laptop(['sbatch', '--version']);
  expect(sbatch.code).not.toBe(0);
  expect(sbatch.err).toMatch(/not on the laptop/);
  const look = await site.laptop(['ls', '-A', site.siteRoot]);
  expect(look.out.trim()).toBe('');
  expectOk(await site.pulumi('up', ['--summary']));
}, 600_000);

afterAll(() => site?.stop());

describe('the laptop reaches the site only over ssh', () => {
  it('infra:up provisioned the site over SSH, and the stack says how to reach it', async () => {
    const r = expectOk(
      await site.laptop([
        'bash',
        '-c',
        'cd "$1/infra" && bash ../scripts/with-toolchain.sh pulumi stack output --json --stack "$2"',
        'sh',
        REPO,
        site.stack,
      ]),
    );
    const outputs = JSON.parse(r.out) as {
      connection: Record<string, unknown>;
      scratch: { runsDir: string };
    };
    expect(outputs.connection).toMatchObject({ kind: 'ssh', host: site.host, user: site.user });
    expect(outputs.connection['privateKey']).toBeUndefined();
    expect(outputs.scratch.runsDir).toBe(`${SCRATCH}/runs`);
    expect(existsSync(site.onSite(`${SCRATCH}/runs`))).toBe(true);
  });

  it('train --wait runs the chain on the site with the code of the snapshot; status, logs and report work from the laptop', async () => {
    const spec = writeSpec('chain', chainSpec('site-chain'));
    const r = await site.runner([...trainArgs(spec), '--wait']);
    expectOk(r);
    const dirs = runDirsOf(r.out);
    expect(dirs.site.startsWith(`${SCRATCH}/runs/site-chain/`)).toBe(true);
    expect(r.out).toMatch(/all 3 task\(s\) completed/);
    // The run dir is on the site, written there by the runner over SSH.
    const manifest = JSON.parse(readFileSync(join(site.onSite(dirs.site), 'manifest.json'), 'utf8')) as {
      code: { tree: string; dir: string; dirty: boolean };
      submission: { status: string };
      jobs: { jobId: string }[];
    };
    expect(manifest.submission.status).toBe('submitted');
    expect(manifest.code.dirty).toBe(false);
    expect(manifest.code.dir).toBe(`${SCRATCH}/code/${manifest.code.tree}`);
    expect(existsSync(join(site.onSite(manifest.code.dir), 'src', 'kdgat', '__init__.py'))).toBe(true);
    // Every job imported kdgat from the snapshot (the site has no other copy of it).
    const logs = readdirSync(join(site.onSite(dirs.site), 'logs'));
    const outs = logs.filter((f) => f.endsWith('.out'));
    expect(outs.length).toBe(3);
    for (const f of outs)
      expect(readFileSync(join(site.onSite(dirs.site), 'logs', f), 'utf8')).toContain(
        `kdgat: code from snapshot ${manifest.code.dir}`,
      );

    // status, logs and report from the laptop, on its local copy.
    const jobs = await statusOf(dirs.local);
    expect(jobs.map((j) => j.tasks.map((t) => t.state).join())).toEqual([
      'COMPLETED',
      'COMPLETED',
      'COMPLETED',
    ]);
    const logsOut = expectOk(await site.runner(['logs', dirs.local, '--job', 'curriculum', '--lines', '50']));
    expect(logsOut.out).toContain(`==> ${dirs.local}/logs/`);
    expect(logsOut.err).toMatch(/local copy .* brought back/);
    const report = expectOk(await site.runner(['report', dirs.local]));
    expect(report.out).toMatch(/report: .*report\.html/);
    expect(existsSync(join(dirs.local, 'report', 'report.html'))).toBe(true);
  });
});
