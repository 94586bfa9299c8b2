// The cluster in the box takes OSC's shape (scripts/site/site.sh): three compute nodes in namespaces
// of their own (c01, c02 in `gpu`, c03 in `cpu`), slurmdbd on MariaDB so `sacct` answers, and cgroup
// limits (proctrack/cgroup, task/cgroup). The runner drives it from the laptop over SSH, as in the
// site suite: a 2-node DDP job of the real pipeline, the records sacct gives, and failures survived
// by their cause (a node killed mid-job, a job over its cgroup memory, a job past its time limit
// without its signal handler). Needs root (namespaces, cgroups) and the bootstrap.
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCRATCH, expectOk, runDirsOf, startSite, statusOfRun, type SshSite } from '../site/site.ts';

let site: SshSite;

function writeSpec(name: string, lines: string[]): string {
  const file = join(site.dir, 'laptop', `${name}.yaml`);
  writeFileSync(file, [`name: ${name}`, 'cluster: local', 'environment: cpu-local', ...lines, ''].join('\n'));
  return file;
}

const trainArgs = (spec: string) => ['train', '--spec', spec, '--stack', site.stack, '--scheduler', 'slurm'];

/** One stage of the quickstart's pipeline, shrunk as the examples suite shrinks it. */
function stage(
  id: string,
  what: {
    stage: string;
    model: string;
    after?: string;
    overrides?: Record<string, number>;
    resources: string;
  },
): string[] {
  const overrides = { 'data.num_workers': 0, 'training.patience': 0, ...what.overrides };
  return [
    `  - id: ${id}`,
    `    stage: ${what.stage}`,
    `    model: ${what.model}`,
    '    scale: small',
    '    dataset: synth',
    ...(what.after ? [`    dependsOn: [${what.after}]`] : []),
    `    overrides: { ${Object.entries(overrides)
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ')} }`,
    `    resources: ${what.resources}`,
  ];
}

const PREPROCESS = stage('preprocess', {
  stage: 'preprocess',
  model: 'gat',
  resources: '{ cpus: 1, memGB: 3, gpus: { count: 0 }, time: "0:20:00" }',
});

/** The site's files of a run's pipeline run dir (`<runRoot>/synth/<model>_small_<stage>`). */
function pipelineDir(siteRunDir: string, name: string): string {
  return join(site.onSite(siteRunDir), 'outputs', 'synth', name);
}

/** The logs of one job of a run (its files are named after the job: `…-<stage id>-<job id>.out`). */
function logsOf(siteRunDir: string, stageId: string): string {
  const dir = join(site.onSite(siteRunDir), 'logs');
  return readdirSync(dir)
    .filter((f) => f.includes(`-${stageId}-`))
    .map((f) => `==> ${f}\n${readFileSync(join(dir, f), 'utf8')}`)
    .join('\n');
}

beforeAll(async () => {
  const t0 = Date.now();
  site = await startSite();
  console.log(
    `cluster box: up in ${((Date.now() - t0) / 1000).toFixed(1)} s (site.sh up, 3 nodes, slurmdbd)`,
  );
  expectOk(await site.pulumi('up', ['--summary']));
}, 600_000);

afterAll(() => site?.stop());

describe('the box has OSC shape', () => {
  it('three nodes in two partitions, accounting answers, and a 1-CPU task sees one core', async () => {
    const sinfo = expectOk(await site.ssh('sinfo -h -N -o "%N %P %c %m %G"')).out;
    expect(sinfo).toMatch(/^c01 gpu\*? 2 6144 gpu:v100:1/m);
    expect(sinfo).toMatch(/^c03 cpu 2 6144 \(null\)/m);
    const job = expectOk(
      await site.ssh(
        `cd ${SCRATCH} && sbatch --parsable --wait -p cpu -c 1 --mem=200M -o cores-%j.out --wrap 'echo "nproc=$(nproc) on $(hostname) TMPDIR=$TMPDIR"'`,
      ),
    ).out.trim();
    expect(readFileSync(site.onSite(`${SCRATCH}/cores-${job}.out`), 'utf8')).toMatch(
      new RegExp(`^nproc=1 on c03 TMPDIR=/tmp/job\\.${job}$`, 'm'),
    );
    const sacct = expectOk(await site.ssh(`sacct -n -P -X -j ${job} -o JobID,State,NodeList,AllocCPUS`)).out;
    expect(sacct.trim()).toBe(`${job}|COMPLETED|c03|1`);
  });
});

describe('multi-node training for real', () => {
  it('a 2-node DDP job of the pipeline: same step and parameters on both ranks, rank 0 writes metrics, each node staged its cache, sacct counts both nodes', async () => {
    const spec = writeSpec('ddp-2node', [
      'staging: { enabled: true }',
      'stages:',
      ...PREPROCESS,
      ...stage('autoencoder', {
        stage: 'autoencoder',
        model: 'vgae',
        after: 'preprocess',
        overrides: { 'training.max_epochs': 2 },
        resources: '{ cpus: 1, memGB: 3, gpus: { count: 1 }, nodes: 2, time: "0:20:00" }',
      }),
    ]);
    const t0 = Date.now();
    const r = expectOk(await site.runner([...trainArgs(spec), '--wait']));
    console.log(
      `2-node DDP chain (preprocess + autoencoder): ${((Date.now() - t0) / 1000).toFixed(1)} s with --wait`,
    );
    expect(r.out).toMatch(/all 2 task\(s\) completed/);
    const dirs = runDirsOf(r.out);
    const runDir = pipelineDir(dirs.site, 'vgae_small_autoencoder');
    const log = logsOf(dirs.site, 'autoencoder');

    // Both ranks, one per node, reached the same step with identical parameters.
    const ranks = [0, 1].map(
      (k) =>
        JSON.parse(readFileSync(join(runDir, 'ddp', `rank_${k}.json`), 'utf8')) as {
          rank: number;
          world_size: number;
          node: string;
          global_step: number;
          params_sha256: string;
        },
    );
    expect(ranks.map((k) => [k.rank, k.world_size, k.node])).toEqual([
      [0, 2, 'c01'],
      [1, 2, 'c02'],
    ]);
    expect(ranks[0]!.global_step).toBeGreaterThan(0);
    expect(ranks[1]!.global_step).toBe(ranks[0]!.global_step);
    expect(ranks[1]!.params_sha256).toBe(ranks[0]!.params_sha256);
    expect(log).toContain('distributed_backend=gloo');
    // Rank 0 alone wrote metrics.json.
    expect(log.match(/metrics written to /g)).toHaveLength(1);
    expect(JSON.parse(readFileSync(join(runDir, 'metrics.json'), 'utf8'))).toMatchObject({ world_size: 2 });
    // Each node staged its own copy of the cache onto its own node-local disk.
    expect(log).toMatch(/kdgat: staging on each of the job's 2 nodes/);
    const staged = [
      ...log.matchAll(/kdgat stage: caches ready on (c0\d) in (\/tmp\/job\.\d+\/kdgat-cache)/g),
    ];
    expect(staged.map((m) => m[1]).sort()).toEqual(['c01', 'c02']);

    // The record: sacct's figures for the whole job, both nodes; the epilog's own figure for comparison.
    const jobs = await statusOfRun(site, dirs.local);
    const ddp = jobs.find((j) => j.key === 'autoencoder')!;
    const task = ddp.tasks[0]!;
    expect(task.nodes).toEqual(['c01', 'c02']);
    expect(task.accounting, JSON.stringify(task)).toBeDefined();
    const acct = task.accounting!;
    expect(acct.allocCpus).toBe(2);
    expect(acct.cpuSeconds).toBeGreaterThan(0);
    const record = JSON.parse(
      readFileSync(join(runDir, 'job_record.jsonl'), 'utf8').trim().split('\n').pop()!,
    ) as { used: { cpuSeconds: number | null; peakRssMB: number | null } };
    const perStep = expectOk(
      await site.ssh(`sacct -n -P -j ${ddp.jobId} -o JobID,TotalCPU,MaxRSS,NodeList,AllocCPUS`),
    ).out;
    console.log(
      [
        `DDP job ${ddp.jobId}: sacct TotalCPU ${acct.cpuSeconds.toFixed(1)} s over ${acct.elapsedSeconds} s on ${acct.allocCpus} CPUs ` +
          `(${((100 * acct.cpuSeconds) / (acct.elapsedSeconds * acct.allocCpus)).toFixed(0)}%), MaxRSS ${acct.maxRssMB ?? 'none'} MB;`,
        `  the epilog's file-based record: cpuSeconds ${record.used.cpuSeconds} s, peakRssMB ${record.used.peakRssMB}`,
        `  sacct per step:\n${perStep.trim().replace(/^/gm, '    ')}`,
      ].join('\n'),
    );
    // The srun step's CPU time is in sacct's figure; the batch shell's children hold almost none of it.
    expect(acct.cpuSeconds).toBeGreaterThan(record.used.cpuSeconds ?? 0);
    expect(perStep).toMatch(new RegExp(`^${ddp.jobId}\\.0\\|[^|]+\\|[^|]*\\|c\\[01-02\\]\\|2$`, 'm'));
    // The summary shows sacct's usage.
    const status = expectOk(await site.runner(['status', dirs.local])).out;
    expect(status).toMatch(/cpu \d+% of 2/);
    expect(existsSync(join(dirs.local, 'manifest.json'))).toBe(true);
  });
});
