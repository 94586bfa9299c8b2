// The cluster in the box takes OSC's shape (scripts/site/site.sh): three compute nodes in namespaces
// of their own (c01, c02 in `gpu`, c03 in `cpu`), slurmdbd on MariaDB so `sacct` answers, and cgroup
// limits (proctrack/cgroup, task/cgroup). The runner drives it from the laptop over SSH, as in the
// site suite: a 2-node DDP job of the real pipeline, the records sacct gives, and failures survived
// by their cause (a node killed mid-job, a job over its cgroup memory, a job past its time limit
// without its signal handler). Needs root (namespaces, cgroups) and the bootstrap.
import { cpSync, existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  SCRATCH,
  expectOk,
  runDirsOf,
  said,
  startSite,
  statusOfRun,
  waitFor,
  writeBoxProfile,
  type SshSite,
} from '../site/site.ts';

let site: SshSite;

function writeSpec(name: string, lines: string[]): string {
  const file = join(site.dir, 'laptop', `${name}.yaml`);
  writeFileSync(
    file,
    [`name: ${name}`, 'cluster: box-cluster.yaml', 'environment: cpu-local', ...lines, ''].join('\n'),
  );
  return file;
}

/** The lines the runner printed about what it resubmitted or stopped (for the suite's output). */
function recoveryLines(r: { out: string; err: string }): string {
  return `${r.out}\n${r.err}`
    .split('\n')
    .filter((l) => /^job \S+ \(\d+, [A-Z_]+/.test(l))
    .map((l) => `  ${l}`)
    .join('\n');
}

interface RecoveryAttempt {
  jobId: string;
  state: string;
  cause: string;
  options: string[];
  resubmittedAs: string;
}

/** The manifest as the site has it: each job's id now and the attempts before it. */
function siteManifest(siteRunDir: string): {
  jobs: { key: string; jobId: string; attempts?: RecoveryAttempt[] }[];
} {
  return JSON.parse(readFileSync(join(site.onSite(siteRunDir), 'manifest.json'), 'utf8'));
}

/** The site's run dir of a run being submitted (its manifest has job ids), found from the test's view. */
async function submittedRun(name: string): Promise<{ runDir: string; jobId: string }> {
  const runsOf = site.onSite(`${SCRATCH}/runs/${name}`);
  const dir = await waitFor(`the run directory of ${name} on the site`, () =>
    existsSync(runsOf) ? readdirSync(runsOf).filter((d) => !d.includes('.partial.'))[0] : undefined,
  );
  const runDir = `${SCRATCH}/runs/${name}/${dir}`;
  const jobId = await waitFor(`the job id of ${name}`, () => {
    const m = siteManifest(runDir);
    return m.jobs[0]?.jobId;
  });
  return { runDir, jobId };
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
  writeBoxProfile(site);
  console.log(
    `cluster box: up in ${((Date.now() - t0) / 1000).toFixed(1)} s (site.sh up, two clusters of 3 and 1 nodes, one slurmdbd)`,
  );
  // Setup only (site.test.ts checks what up provisions): no preview before the update.
  expectOk(await site.pulumi('up', ['--summary', '--skip-preview']));
}, 600_000);

afterAll(() => site?.stop());

describe('the box has OSC shape', () => {
  it('three nodes in two partitions, a second cluster beside it under the same slurmdbd, accounting answers, and a 1-CPU task sees one core', async () => {
    const sinfo = expectOk(await site.ssh('sinfo -h -N -o "%N %P %c %m %G"')).out;
    expect(sinfo).toMatch(/^c01 gpu\*? 2 6144 gpu:v100:1/m);
    expect(sinfo).toMatch(/^c03 cpu 2 6144 \(null\)/m);
    expect(sinfo).not.toMatch(/^c04/m);
    // The annex: its own controller, reached with -M through the one slurmdbd.
    const annex = expectOk(await site.ssh('sinfo -M kdgat-annex -h -N -o "%N %P %G"')).out;
    expect(annex).toMatch(/^c04 gpu\*? gpu:a100:1/m);
    expect(
      expectOk(await site.ssh('sacctmgr -n -P list cluster format=Cluster'))
        .out.split('\n')
        .sort(),
    ).toEqual(expect.arrayContaining(['kdgat-annex', 'kdgat-site']));
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
    expect(log).toMatch(/kdgat-hpc: staging on each of the job's 2 nodes/);
    const staged = [
      ...log.matchAll(/kdgat-hpc stage: caches ready on (c0\d) in (\/tmp\/job\.\d+\/hpc-cache)/g),
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
    // Memory: the largest task (MaxRSS) and every task of the step on both nodes (TRESUsageInTot).
    expect(acct.maxRssMB).toBeGreaterThan(0);
    expect(acct.totalRssMB).toBeGreaterThan(acct.maxRssMB!);
    const record = JSON.parse(
      readFileSync(join(runDir, 'job_record.jsonl'), 'utf8').trim().split('\n').pop()!,
    ) as { used: { cpuSeconds: number | null; peakRssMB: number | null } };
    const perStep = expectOk(
      await site.ssh(`sacct -n -P -j ${ddp.jobId} -o JobID,TotalCPU,MaxRSS,NodeList,AllocCPUS`),
    ).out;
    console.log(
      [
        `DDP job ${ddp.jobId}: sacct TotalCPU ${acct.cpuSeconds.toFixed(1)} s over ${acct.elapsedSeconds} s on ${acct.allocCpus} CPUs ` +
          `(${((100 * acct.cpuSeconds) / (acct.elapsedSeconds * acct.allocCpus)).toFixed(0)}%), MaxRSS ${acct.maxRssMB ?? 'none'} MB, both ranks ${acct.totalRssMB ?? 'none'} MB;`,
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

describe('preprocessing spread across nodes', () => {
  /** A preprocess stage of `dataset` on the two-node `gpu` partition, one task per node at a time. */
  const preprocessOf = (id: string, dataset: string, shards?: number) => [
    `  - id: ${id}`,
    '    stage: preprocess',
    '    model: gat',
    '    scale: small',
    `    dataset: ${dataset}`,
    ...(shards ? [`    shards: ${shards}`] : []),
    '    overrides: { data.num_workers: 0 }',
    '    resources: { cpus: 2, memGB: 2, gpus: { count: 0 }, partition: gpu, arrayConcurrency: 3, time: "0:20:00" }',
  ];
  const raw = (dataset: string) => site.onSite(`/fs/ess/data/raw/${dataset}`);
  /** The site's files of a data set's cache (the stack's scratch cache dir of that data set). */
  const cacheOf = (dataset: string) => site.onSite(`${SCRATCH}/cache/${dataset}`);
  interface LedgerEntry {
    relpath: string;
    status: 'ok' | 'failed';
    error?: string;
    host: string;
  }
  const ledger = (dataset: string): LedgerEntry[] => {
    const shards = join(cacheOf(dataset), 'shards');
    return readdirSync(shards).flatMap((digest) =>
      readdirSync(join(shards, digest, 'ledger'))
        .filter((f) => f.endsWith('.json') && !f.startsWith('.'))
        .map((f) => JSON.parse(readFileSync(join(shards, digest, 'ledger', f), 'utf8')) as LedgerEntry),
    );
  };
  /** What each shard task of a run built and skipped (its metrics.json under outputs/shard_<i>). */
  const shardMetrics = (siteRunDir: string, count: number) =>
    Array.from({ length: count }, (_, i) => {
      const file = join(
        site.onSite(siteRunDir),
        'outputs',
        `shard_${i}`,
        'shardset',
        'gat_small_preprocess',
        'metrics.json',
      );
      return JSON.parse(readFileSync(file, 'utf8')) as { built: string[]; skipped: string[] };
    });

  it('a preprocess over 8 recordings as 3 shard tasks on two nodes: a failed shard, the rerun redoing only it, the join byte-identical to a one-job build', async () => {
    cpSync(raw('synth'), raw('shardset'), { recursive: true });
    cpSync(raw('synth'), raw('shardref'), { recursive: true });
    // One recording made unreadable: every fourth row malformed (the pipeline refuses more than 5 %).
    const broken = join(raw('shardset'), 'train_rpm.csv');
    const good = readFileSync(broken, 'utf8');
    writeFileSync(
      broken,
      good
        .split('\n')
        .map((l, i) => (i > 0 && i % 4 === 0 && l !== '' ? 'not,a,can,row' : l))
        .join('\n'),
    );
    const spec = writeSpec('sharded-preprocess', ['stages:', ...preprocessOf('preprocess', 'shardset', 3)]);
    const plan = expectOk(
      await site.runner(['plan', '--spec', spec, '--stack', site.stack, '--scheduler', 'slurm']),
    );
    expect(plan.out).toMatch(/preprocess\.shards: array of 3 shard tasks \(%3\)/);
    expect(plan.out).toMatch(/ {2}preprocess: join of 3 shards after preprocess\.shards/);

    const t0 = Date.now();
    const failed = await site.runner([...trainArgs(spec), '--wait']);
    const failedSeconds = (Date.now() - t0) / 1000;
    expect(failed.code, said(failed)).not.toBe(0);
    const first = runDirsOf(failed.out);
    expect(logsOf(first.site, 'preprocess')).toMatch(/train_rpm\.csv: \d+ of \d+ rows are malformed/);
    const afterFailure = ledger('shardset');
    expect(afterFailure.filter((e) => e.status === 'failed').map((e) => e.relpath)).toEqual([
      'train_rpm.csv',
    ]);
    expect(afterFailure.filter((e) => e.status === 'ok')).toHaveLength(7);
    // The shard tasks ran on both nodes of the partition.
    expect(new Set(afterFailure.map((e) => e.host)).size, JSON.stringify(afterFailure)).toBe(2);
    expect(existsSync(join(cacheOf('shardset'), 'graphs.pt'))).toBe(false);

    // The recording fixed, the same spec again: only its shard is built, the join makes the cache.
    writeFileSync(broken, good);
    const t1 = Date.now();
    const rerun = expectOk(await site.runner([...trainArgs(spec), '--wait']));
    const rerunSeconds = (Date.now() - t1) / 1000;
    expect(rerun.out).toMatch(/all 4 task\(s\) completed/);
    const second = runDirsOf(rerun.out);
    const tasks = shardMetrics(second.site, 3);
    expect(tasks.flatMap((t) => t.built)).toEqual(['train_rpm.csv']);
    expect(tasks.flatMap((t) => t.skipped)).toHaveLength(7);

    // The one-job build of the same recordings, in a cache of its own: the same bytes.
    const reference = writeSpec('one-job-preprocess', ['stages:', ...preprocessOf('preprocess', 'shardref')]);
    const t2 = Date.now();
    expectOk(await site.runner([...trainArgs(reference), '--wait']));
    const oneJobSeconds = (Date.now() - t2) / 1000;
    for (const f of ['graphs.pt', 'vocab.json'])
      expect(
        readFileSync(join(cacheOf('shardset'), f)).equals(readFileSync(join(cacheOf('shardref'), f))),
        f,
      ).toBe(true);
    // meta.json: the same but for the data set's name and folder, and the mtime of the rewritten file.
    const meta = (ds: string) => {
      const {
        dataset: _d,
        raw_dir: _r,
        sources,
        ...rest
      } = JSON.parse(readFileSync(join(cacheOf(ds), 'meta.json'), 'utf8')) as Record<string, unknown> & {
        sources: Record<string, unknown>[];
      };
      return { ...rest, sources: sources.map(({ mtime_ns: _m, ...s }) => s) };
    };
    expect(meta('shardset')).toEqual(meta('shardref'));
    console.log(
      `sharded preprocess on the box (8 recordings, 3 tasks on c01/c02): failed run ${failedSeconds.toFixed(1)} s, ` +
        `rerun of the failed shard + join ${rerunSeconds.toFixed(1)} s; one-job build ${oneJobSeconds.toFixed(1)} s (all with --wait)`,
    );
  });
});

describe("a run throttled to the site's per-user limit", () => {
  it("a sweep of 6 points over two chained array stages, with one job of the user already running and the limit lowered to 3: never more than 3 of the user's jobs run at once", async () => {
    writeBoxProfile(site, { file: 'box-limited.yaml', fields: { limits: { maxRunningJobsPerUser: 3 } } });
    // The user's other job: one of the 3 running slots the profile declares.
    const sleeper = expectOk(
      await site.ssh(
        `cd ${SCRATCH} && sbatch --parsable -p cpu -c 1 --mem=100M -o /dev/null --wrap 'sleep 600'`,
      ),
    ).out.trim();
    await waitFor('the other job to run', async () =>
      (await site.ssh(`squeue -h -j ${sleeper} -o %T`)).out.trim() === 'RUNNING' ? true : undefined,
    );
    try {
      const stageOf = (id: string, after?: string) => [
        `  - id: ${id}`,
        '    stage: preprocess',
        '    model: gat',
        '    scale: small',
        '    dataset: synth',
        ...(after ? [`    dependsOn: [${after}]`] : []),
        '    overrides: { data.num_workers: 0 }',
        '    resources: { cpus: 1, memGB: 1, gpus: { count: 0 }, arrayConcurrency: 6, time: "0:20:00" }',
      ];
      const spec = join(site.dir, 'laptop', 'throttled-sweep.yaml');
      writeFileSync(
        spec,
        [
          'name: throttled-sweep',
          'cluster: box-limited.yaml',
          'environment: cpu-local',
          'stages:',
          ...stageOf('first'),
          ...stageOf('second', 'first'),
          'sweep:',
          '  grid:',
          '    training.seed: [1, 2, 3, 4, 5, 6]',
          '',
        ].join('\n'),
      );
      const r = expectOk(await site.runner([...trainArgs(spec), '--wait']));
      expect(r.out).toContain(
        "throttle: at most 2 of this run's 12 jobs at once, from the site's 3 running jobs per user less 1 of yours queued or running; each of its 2 array stage(s) at most 1 task(s) at once",
      );
      expect(r.out).toMatch(/all 12 task\(s\) completed/);
      expect(r.out).toMatch(/held by the run's throttle \(at most 1 at once\)/);
      // What ran when (sacct): the run's tasks and the other job, never more than 3 at once.
      const manifest = JSON.parse(readFileSync(join(runDirsOf(r.out).local, 'manifest.json'), 'utf8')) as {
        jobs: { jobId: string }[];
      };
      const ids = [...manifest.jobs.map((j) => j.jobId), sleeper].join(',');
      const rows = expectOk(await site.ssh(`sacct -n -P -X -j ${ids} -o JobID,Start,End,State`))
        .out.trim()
        .split('\n')
        .map((l) => l.split('|'));
      const now = Date.now();
      const events = rows
        .filter(([, start]) => start !== 'Unknown' && start !== 'None')
        .flatMap(([, start, end]) => [
          { at: Date.parse(start!), d: 1 },
          { at: end === 'Unknown' ? now : Date.parse(end!), d: -1 },
        ])
        .sort((a, b) => a.at - b.at || a.d - b.d);
      let running = 0;
      let most = 0;
      for (const e of events) most = Math.max(most, (running += e.d));
      console.log(
        `throttled sweep: at most ${most} of the user's jobs at once (sacct), the run's 12 tasks and 1 other`,
      );
      expect(rows.filter(([id]) => id!.includes('_'))).toHaveLength(12);
      expect(most).toBeLessThanOrEqual(3);
      expect(most).toBeGreaterThanOrEqual(2);
    } finally {
      await site.ssh(`scancel ${sleeper}`);
    }
  });
});

describe("placement across the site's two clusters", () => {
  it("--cluster auto: with both clusters idle the cheaper wins the tie; with the first cluster's gpu nodes taken, the run goes to the annex (-M), which the manifest records with why", async () => {
    const spec = writeSpec('placed', ['stages:', ...PREPROCESS]);
    const plan = (extra: string[]) =>
      site.runner(['plan', '--spec', spec, '--stack', site.stack, '--cluster', 'auto', ...extra]);
    // Both idle: the same start, so the first cluster's lower rates decide.
    const idle = expectOk(await plan([]));
    expect(idle.out).toMatch(
      /cluster kdgat-site \(the login node's own\): starts \S+, [\d.]+ expected, [\d.]+ worst SU/,
    );
    expect(idle.out).toMatch(/cluster kdgat-annex \(-M kdgat-annex\): starts \S+/);
    expect(idle.out).toMatch(/placement: cluster kdgat-site \(auto\): .*cheaper than kdgat-annex/);
    // An unknown name is refused, naming the site's clusters; nothing is queued.
    const unknown = await site.runner([...trainArgs(spec), '--cluster', 'ascend']);
    expect(unknown.code).not.toBe(0);
    expect(said(unknown)).toContain('--cluster ascend: not a cluster of stack');
    expect(said(unknown)).toContain('kdgat-site, kdgat-annex or auto');

    // Someone else's job holds both gpu nodes of the first cluster for its 30-minute limit.
    const busy = expectOk(
      await site.ssh(
        `sbatch -M kdgat-site --parsable -p gpu -N 2 --exclusive --time=00:30:00 -o /dev/null --wrap 'sleep 1800'`,
      ),
    )
      .out.trim()
      .split(';')[0]!;
    try {
      await waitFor('the first cluster to be busy', async () =>
        (await site.ssh(`squeue -M kdgat-site -h -j ${busy} -o %T`)).out.includes('RUNNING')
          ? true
          : undefined,
      );
      const r = expectOk(await site.runner([...trainArgs(spec), '--cluster', 'auto', '--wait']));
      const starts = Object.fromEntries(
        [...r.out.matchAll(/cluster (kdgat-\w+) \([^)]+\): starts (\S+),/g)].map((m) => [
          m[1],
          Date.parse(`${m[2]}Z`),
        ]),
      );
      // The controller's own forecast: the first cluster frees its nodes when the busy job's limit ends.
      expect(starts['kdgat-site']! - starts['kdgat-annex']!).toBeGreaterThan(25 * 60_000);
      expect(r.out).toMatch(
        /placement: cluster kdgat-annex \(auto\): expected start \S+; earlier than kdgat-site/,
      );
      expect(r.out).toMatch(/all 1 task\(s\) completed/);
      const manifest = JSON.parse(readFileSync(join(runDirsOf(r.out).local, 'manifest.json'), 'utf8')) as {
        placement: { cluster: string; clusterName: string; mode: string; why: string; candidates: unknown[] };
        jobs: { jobId: string }[];
      };
      expect(manifest.placement).toMatchObject({
        cluster: 'kdgat-annex',
        clusterName: 'kdgat-annex',
        via: 'kdgat-annex',
        mode: 'auto',
      });
      expect(manifest.placement.candidates).toHaveLength(2);
      // It ran on the annex's node, in the annex's accounting.
      const job = manifest.jobs[0]!.jobId;
      const sacct = expectOk(await site.ssh(`sacct -M kdgat-annex -n -P -X -j ${job} -o State,NodeList`)).out;
      expect(sacct.trim()).toBe('COMPLETED|c04');
      // Later commands reach it through the manifest's cluster.
      const status = expectOk(await site.runner(['status', runDirsOf(r.out).local]));
      expect(status.out).toContain('cluster kdgat-annex (-M kdgat-annex, auto)');
      expect(status.out).toMatch(/COMPLETED/);
      // A reproduction goes where the recorded run went, and renders the same scripts there.
      const again = expectOk(
        await site.runner(['plan', '--from-manifest', runDirsOf(r.out).local, '--stack', site.stack]),
      );
      expect(again.out).toContain(
        "placement: cluster kdgat-annex (named): --cluster kdgat-annex (the reproduced run's)",
      );
      expect(again.out).toMatch(/re-rendered scripts are byte-identical to the recorded ones/);
      console.log(
        `placement: kdgat-site forecast ${((starts['kdgat-site']! - starts['kdgat-annex']!) / 60_000).toFixed(1)} min after kdgat-annex; ${manifest.placement.why}`,
      );
    } finally {
      await site.ssh(`scancel -M kdgat-site ${busy}`);
    }
  });
});

describe.concurrent('failures survived by cause', () => {
  // The stages below read the graph cache of synth (made again here, so these run on their own too).
  beforeAll(async () => {
    expectOk(await site.runner([...trainArgs(writeSpec('cache', ['stages:', ...PREPROCESS])), '--wait']));
  }, 600_000);

  it('NODE_FAIL: the node dies mid-job; --wait resubmits excluding it, resuming from last.ckpt, and its cancelled dependent after it', async () => {
    const name = 'node-fail';
    const spec = writeSpec(name, [
      // Not requeueable: a node failure ends the job NODE_FAIL instead of SLURM requeueing it.
      'requeue: { enabled: false }',
      'stages:',
      ...stage('train', {
        stage: 'autoencoder',
        model: 'vgae',
        overrides: { 'training.max_epochs': 40 },
        resources: '{ cpus: 1, memGB: 3, gpus: { count: 0 }, partition: gpu, time: "0:20:00" }',
      }),
      ...stage('eval', {
        stage: 'curriculum',
        model: 'gat',
        after: 'train',
        overrides: { 'training.max_epochs': 1 },
        resources: '{ cpus: 1, memGB: 3, gpus: { count: 0 }, partition: gpu, time: "0:20:00" }',
      }),
    ]);
    const waiting = site.runner([...trainArgs(spec), '--wait']);
    const { runDir, jobId } = await submittedRun(name);
    const checkpoint = join(pipelineDir(runDir, 'vgae_small_autoencoder'), 'checkpoints', 'last.ckpt');
    await waitFor(`the first epoch's checkpoint ${checkpoint}`, () => existsSync(checkpoint));
    const node = expectOk(await site.ssh(`squeue -h -j ${jobId} -o %N`)).out.trim();
    expect(['c01', 'c02']).toContain(node);
    let r;
    try {
      expectOk(site.killNode(node));
      r = await waiting;
    } finally {
      expectOk(site.reviveNode(node));
    }
    expect(r.code, said(r)).toBe(0);
    const resubmitted = new RegExp(
      `job train \\(${jobId}, NODE_FAIL on ${node}\\): resubmitted as (\\d+) excluding ${node}, resuming from checkpoints/last\\.ckpt`,
    ).exec(r.out + r.err);
    expect(resubmitted, said(r)).not.toBeNull();
    console.log(`NODE_FAIL (node ${node} killed after the first checkpoint):\n${recoveryLines(r)}`);
    expect(r.out + r.err).toMatch(
      /job eval \(\d+, CANCELLED[^)]*\): resubmitted as \d+ after train's resubmission/,
    );
    expect(r.out).toMatch(/all 2 task\(s\) completed/);
    const manifest = siteManifest(runDir);
    const train = manifest.jobs.find((j) => j.key === 'train')!;
    expect(train.jobId).toBe(resubmitted![1]);
    expect(train.attempts).toEqual([
      expect.objectContaining({
        jobId,
        state: 'NODE_FAIL',
        cause: 'NODE_FAIL',
        options: [`--exclude=${node}`],
      }),
    ]);
    expect(manifest.jobs.find((j) => j.key === 'eval')!.attempts?.[0]?.cause).toBe('DEPENDENCY');
    // The second attempt ran elsewhere and went on from the checkpoint.
    const other = expectOk(await site.ssh(`sacct -n -P -X -j ${train.jobId} -o NodeList`)).out.trim();
    expect(other).not.toBe(node);
    expect(logsOf(runDir, 'train')).toMatch(/resuming from .*last\.ckpt/);
  });

  it('OUT_OF_MEMORY: a job over its cgroup memory; `resume` (nobody watching) resubmits it with memory raised from the record', async () => {
    const name = 'over-memory';
    const spec = writeSpec(name, [
      'stages:',
      ...stage('train', {
        stage: 'autoencoder',
        model: 'vgae',
        overrides: { 'training.max_epochs': 2 },
        // 256 MB: less than the pipeline needs (about 450 MB in the DDP test's record).
        resources: '{ cpus: 1, memGB: 0.25, gpus: { count: 0 }, partition: cpu, time: "0:20:00" }',
      }),
    ]);
    const submitted = expectOk(await site.runner(trainArgs(spec)));
    const dirs = runDirsOf(submitted.out);
    const { jobId } = await submittedRun(name);
    await waitFor(`job ${jobId} to end OUT_OF_MEMORY`, async () => {
      const state = (await statusOfRun(site, dirs.local))[0]!.tasks[0]!.state;
      if (state === 'COMPLETED' || state === 'FAILED')
        throw new Error(`job ${jobId} ended ${state}, not OUT_OF_MEMORY`);
      return state === 'OUT_OF_MEMORY';
    });
    const r = await site.runner(['resume', dirs.local, '--wait']);
    expect(r.code, said(r)).toBe(0);
    const line = new RegExp(
      `job train \\(${jobId}, OUT_OF_MEMORY\\): resubmitted as (\\d+) with --mem=(\\d+)G`,
    ).exec(r.out + r.err);
    expect(line, said(r)).not.toBeNull();
    console.log(`OUT_OF_MEMORY (--mem=256M, picked up by resume):\n${recoveryLines(r)}`);
    expect(Number(line![2])).toBeGreaterThanOrEqual(1);
    expect(Number(line![2])).toBeLessThanOrEqual(6); // the partition's memory per node
    expect(r.out).toMatch(/all 1 task\(s\) completed/);
    const train = siteManifest(dirs.site).jobs[0]!;
    expect(train.attempts).toEqual([
      expect.objectContaining({
        jobId,
        state: 'OUT_OF_MEMORY',
        cause: 'OUT_OF_MEMORY',
        options: [`--mem=${line![2]}G`],
      }),
    ]);
    const sacct = expectOk(
      await site.ssh(`sacct -n -P -X -j ${jobId},${train.jobId} -o JobID,State,ReqMem`),
    ).out;
    expect(sacct).toMatch(new RegExp(`^${jobId}\\|OUT_OF_MEMORY\\|256M$`, 'm'));
    // sacct prints ReqMem in the largest whole unit (1G, 1536M).
    const mb = Number(line![2]) * 1024;
    expect(sacct).toMatch(new RegExp(`^${train.jobId}\\|COMPLETED\\|(${line![2]}G|${mb}M)$`, 'm'));
  });

  it('TIMEOUT without the signal handler: a job that hangs past its limit; --wait resubmits it from last.ckpt with the time right-sized from its history', async () => {
    const name = 'past-time';
    const spec = writeSpec(name, [
      // No pre-timeout signal: the job is killed at its limit with nothing acknowledged.
      'requeue: { enabled: false }',
      'stages:',
      ...stage('train', {
        stage: 'autoencoder',
        model: 'vgae',
        overrides: { 'training.max_epochs': 60 },
        resources: '{ cpus: 1, memGB: 3, gpus: { count: 0 }, partition: cpu, time: "0:01:00" }',
      }),
    ]);
    const waiting = site.runner([...trainArgs(spec), '--wait']);
    const { runDir, jobId } = await submittedRun(name);
    const stageDir = pipelineDir(runDir, 'vgae_small_autoencoder');
    // Three epochs in its history (history.csv: a header and a row an epoch), so that the
    // resubmission's time limit is sized from them; a checkpoint to resume from.
    await waitFor(`three epochs in ${stageDir}/history.csv and a checkpoint`, () => {
      const history = join(stageDir, 'history.csv');
      const rows = existsSync(history) ? readFileSync(history, 'utf8').trim().split('\n').length - 1 : 0;
      return rows >= 3 && existsSync(join(stageDir, 'checkpoints', 'last.ckpt'));
    });
    // The job hangs (as on a stuck filesystem or collective): every process of it stopped, through
    // SLURM from the login node. It holds its node until its limit, whatever this machine's speed.
    expectOk(await site.ssh(`scancel --full --signal=STOP ${jobId}`));
    const r = await waiting;
    expect(r.code, said(r)).toBe(0);
    const train = siteManifest(runDir).jobs[0]!;
    const first = train.attempts?.[0];
    expect(first, said(r)).toMatchObject({ state: 'TIMEOUT', cause: 'TIMEOUT' });
    expect(first!.jobId).toBe(jobId);
    console.log(`TIMEOUT (--time=0:01:00, stopped after three epochs, no signal):\n${recoveryLines(r)}`);
    const time = /^--time=(\d+):(\d\d):(\d\d)$/.exec(first!.options[0] ?? '');
    expect(time, JSON.stringify(first)).not.toBeNull();
    expect(Number(time![1]) * 3600 + Number(time![2]) * 60 + Number(time![3])).toBeGreaterThan(60);
    expect(r.out + r.err).toMatch(
      new RegExp(
        `job train \\(${first!.jobId}, TIMEOUT\\): resubmitted as ${train.jobId} with --time=\\S+ \\(\\d+ epoch\\(s\\) left of 60 at .*resuming from checkpoints/last\\.ckpt`,
      ),
    );
    expect(r.out).toMatch(/all 1 task\(s\) completed/);
    expect(logsOf(runDir, 'train')).toMatch(/resuming from .*last\.ckpt/);
  });
});
