// From the laptop to a site reachable only over SSH (site.ts): `infra:up` of the SSH stack through
// Pulumi, then the runner — train --wait, status, logs, report, a requeue, --from-manifest, cancel,
// and a --wait whose SSH master is killed halfway — with the pipeline's code arriving only as the
// run's snapshot. Needs root (namespaces) and the bootstrap; run by scripts/test.sh.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { JUPYTER_DRIVER, shq } from '@kdgat/slurm-templates';
import {
  KERNELS,
  REPO,
  SCRATCH,
  expectOk,
  runDirsOf,
  said,
  siteStackConfig,
  startSite,
  statusOfRun,
  waitFor,
  type Run,
  type SshSite,
} from './site.ts';

let site: SshSite;
/** The MLflow server of the requeue test, on the login node. */
const MLFLOW_PORT = 5055;
/** The chain's run (the first test's), for the tests that come back to it. */
let chainRun: { site: string; local: string } | undefined;

/** `text` as a regular expression that matches only itself. */
const regexQuote = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

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

const statusOf = (localRunDir: string) => statusOfRun(site, localRunDir);

/** `pulumi stack output --json` of the site's stack, run on the laptop. */
async function stackOutputs(): Promise<unknown> {
  const r = await site.laptop([
    'bash',
    '-c',
    'cd "$1/infra" && bash ../scripts/with-toolchain.sh pulumi stack output --json --stack "$2"',
    'sh',
    REPO,
    site.stack,
  ]);
  return JSON.parse(expectOk(r).out);
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
    const outputs = (await stackOutputs()) as {
      connection: Record<string, unknown>;
      scratch: { runsDir: string };
    };
    expect(outputs.connection).toMatchObject({ kind: 'ssh', host: site.host, user: site.user });
    expect(outputs.connection['privateKey']).toBeUndefined();
    expect(outputs.scratch.runsDir).toBe(`${SCRATCH}/runs`);
    expect(existsSync(site.onSite(`${SCRATCH}/runs`))).toBe(true);
  });

  it("a bump in python/uv.lock shows as that package's line in pulumi preview --diff of the SSH stack", async () => {
    const r = expectOk(await site.previewWithLockBump('psutil', '7.2.2', '7.2.3'));
    const text = `${r.out}${r.err}`;
    expect(text).toMatch(/^\s*-\s+- psutil==7\.2\.2$/m);
    expect(text).toMatch(/^\s*\+\s+- psutil==7\.2\.3$/m);
    // Only that package's line changed, in each of the two environments (both install the pins).
    const changed = text.split('\n').filter((l) => /^\s*[-+]\s+- [A-Za-z0-9_.-]+==/.test(l));
    expect(changed.map((l) => l.trim().replace(/\s+/g, ' ')).sort()).toEqual([
      '+ - psutil==7.2.3',
      '+ - psutil==7.2.3',
      '- - psutil==7.2.2',
      '- - psutil==7.2.2',
    ]);
  });

  it('train --wait runs the chain on the site with the code of the snapshot; status, logs and report work from the laptop', async () => {
    const spec = writeSpec('chain', chainSpec('site-chain'));
    const r = await site.runner([...trainArgs(spec), '--wait']);
    expectOk(r);
    const dirs = runDirsOf(r.out);
    chainRun = dirs;
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
    // The site user's own code root: mode 700, theirs alone (nobody else in the group can plant a tree).
    expect(manifest.code.dir).toBe(`${SCRATCH}/code/${site.user}/${manifest.code.tree}`);
    expect(statSync(site.onSite(`${SCRATCH}/code/${site.user}`)).mode & 0o777).toBe(0o700);
    expect(existsSync(join(site.onSite(manifest.code.dir), 'src', 'kdgat', '__init__.py'))).toBe(true);
    // Every job imported kdgat from the snapshot (the site has no other copy of it).
    const logs = readdirSync(join(site.onSite(dirs.site), 'logs'));
    const outs = logs.filter((f) => f.endsWith('.out'));
    expect(outs.length).toBe(3);
    for (const f of outs)
      expect(readFileSync(join(site.onSite(dirs.site), 'logs', f), 'utf8')).toContain(
        `kdgat-hpc: code from ${manifest.code.dir}`,
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

    // The catalogue on the site, brought back and read on the laptop: one row per stage of the run.
    const runs = expectOk(
      await site.runner([
        'runs',
        '--stack',
        site.stack,
        '--where',
        `run_id=${basename(dirs.site)}`,
        '--json',
      ]),
    );
    const rows = JSON.parse(runs.out) as { stage_id: string; state: string; environment: string }[];
    expect(rows.map((r) => [r.stage_id, r.state, r.environment]).sort()).toEqual([
      ['autoencoder', 'COMPLETED', 'cpu-local'],
      ['curriculum', 'COMPLETED', 'cpu-local'],
      ['preprocess', 'COMPLETED', 'cpu-local'],
    ]);
    // TensorBoard: the log dir on the site (for OnDemand's TensorBoard app) and the event files here.
    const tb = expectOk(await site.runner(['tensorboard', dirs.local]));
    expect(tb.out).toContain(`tensorboard log dir on the site: ${dirs.site}`);
    expect(tb.out).toMatch(/2 stage run\(s\) with event files/);
    // sync runs on the login node (where a site has a network), in the run's environment.
    const sync = expectOk(await site.runner(['sync', dirs.local, '--stack', site.stack]));
    expect(sync.out).toContain(`tracking-sync of ${dirs.site} on ${site.user}@${site.host}:${site.port}`);
    expect(sync.out).toContain(`kdgat: no offline W&B runs below ${dirs.site}`);
  });

  it('runs over SSH brings back the catalogue its writers keep compacted, not a file per row: 300 more rows written on the site one at a time', async () => {
    expect(chainRun, 'the chain test ran first').toBeDefined();
    // The site's writers (write_row of the default pipeline, one row per finished stage), as the
    // site user on the login node: bench/catalogue's rows, 300 stages of other runs.
    // The site sees none of this checkout but its venv: the writer script goes to the site's scratch,
    // and the default pipeline's code is the one the chain shipped (code/<user>/current).
    const catalogue = `${SCRATCH}/runs/catalogue`;
    const script = `${SCRATCH}/bench-catalogue-rows.py`;
    cpSync(join(REPO, 'bench', 'catalogue', 'rows.py'), site.onSite(script));
    const write = [
      'env',
      `PYTHONPATH=${SCRATCH}/code/${site.user}/current/src`,
      join(REPO, 'python', '.venv', 'bin', 'python'),
      script,
      catalogue,
      '--rows',
      '300',
      '--start',
      '1000000',
    ];
    expectOk(await site.ssh(write.map(shq).join(' ')));
    const onSite = readdirSync(site.onSite(catalogue))
      .filter((f) => f.endsWith('.parquet'))
      .sort();
    // Under 64 one-row files and a few merged parts (the chain's 3 rows and the 300).
    expect(onSite.length).toBeLessThan(64 + 8);
    expect(onSite.some((f) => f.startsWith('part-'))).toBe(true);

    const runs = expectOk(
      await site.runner([
        'runs',
        '--stack',
        site.stack,
        '--where',
        'experiment~sweep-*',
        '--json',
        '--columns',
        'row_key,state',
      ]),
    );
    expect(new Set((JSON.parse(runs.out) as { row_key: string }[]).map((r) => r.row_key)).size).toBe(300);
    // The local copy is the site's folder as it is now: its files, the merged-away ones gone.
    const local = /brought back to (\S+)/.exec(runs.err)?.[1];
    expect(local, runs.err).toBeDefined();
    expect(
      readdirSync(local!)
        .filter((f) => f.endsWith('.parquet'))
        .sort(),
    ).toEqual(onSite);
    // The chain's rows are among them still.
    const chain = expectOk(
      await site.runner([
        'runs',
        '--stack',
        site.stack,
        '--where',
        `run_id=${basename(chainRun!.site)}`,
        '--json',
      ]),
    );
    expect((JSON.parse(chain.out) as unknown[]).length).toBe(3);
  });

  it("the environment's notebook kernel starts on a compute node, imports the shipped code and prints its lock", async () => {
    // As OnDemand's Jupyter app: the notebook server runs in a job on a compute node and starts the
    // kernel from the kernelspec infra wrote; here jupyter_client does that inside an srun.
    const outputs = (await stackOutputs()) as {
      environments: { name: string; lockHash: string }[];
    };
    const lockHash = outputs.environments.find((e) => e.name === 'cpu-local')!.lockHash;
    const kernelJson = JSON.parse(readFileSync(site.onSite(`${KERNELS}/cpu-local/kernel.json`), 'utf8')) as {
      display_name: string;
    };
    expect(kernelJson.display_name).toBe('KD-GAT (cpu-local)');
    const cell = [
      'import kdgat, torch_geometric, os, socket',
      "print(os.environ['HPC_ENV_LOCK_HASH'])",
      'print(kdgat.__file__)',
      'print(socket.gethostname())',
    ].join('\n');
    const jupyter = `${SCRATCH}/jupyter-test`;
    const command = [
      'env',
      `JUPYTER_RUNTIME_DIR=${jupyter}/runtime`,
      `JUPYTER_DATA_DIR=${jupyter}/data`,
      `JUPYTER_CONFIG_DIR=${jupyter}/config`,
      'JUPYTER_PLATFORM_DIRS=1',
      `IPYTHONDIR=${jupyter}/ipython`,
      'timeout',
      '300',
      'srun',
      '--partition=cpu',
      '--ntasks=1',
      '--cpus-per-task=1',
      '--mem=2G',
      '--time=5',
      join(REPO, 'python', '.venv', 'bin', 'python'),
      '-c',
      JUPYTER_DRIVER,
      KERNELS,
      'cpu-local',
      cell,
      '120',
    ];
    const r = expectOk(await site.ssh(command.map(shq).join(' ')));
    const result = JSON.parse(r.out.trim().split('\n').pop()!) as {
      error?: string;
      stdout: string;
      stderr: string;
    };
    expect(result.error, result.stderr).toBeUndefined();
    const [printedHash, kdgatFile, host] = result.stdout.trim().split('\n');
    expect(printedHash).toBe(lockHash);
    // the code of the latest run the user shipped (<scratch>/code/<user>/current), not a copy of its own
    expect(kdgatFile).toBe(`${SCRATCH}/code/${site.user}/current/src/kdgat/__init__.py`);
    expect(host).toBe('c03');
  });

  it('a requeue on the site is followed by a --wait whose SSH master is killed halfway; status sees the end', async () => {
    expect(
      chainRun,
      'the chain test ran first (its preprocess made the synth cache this stage reads)',
    ).toBeDefined();
    const name = 'site-requeue';
    // A real MLflow server on the login node, reached by the job on its compute node by name: the
    // requeued job must continue the same MLflow run (tracking.mlflow.*).
    // Its store is this site's own (a store left by another run would hold that run's runs too).
    const mlflowDir = `/tmp/kdgat-site-mlflow-${basename(site.dir)}`;
    const venvPython = join(REPO, 'python', '.venv', 'bin', 'python');
    const server = [
      // MLflow's job execution (Huey workers for its GenAI jobs, not tracking) is off, as in
      // python/tests/test_tracking_e2e.py: without Huey installed it relaunches them several times a
      // second, a second process on the SQLite store and load on the box's login node.
      'env',
      'MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false',
      'timeout',
      '900',
      venvPython,
      '-m',
      'mlflow',
      'server',
      '--backend-store-uri',
      `sqlite:///${mlflowDir}/mlflow.db`,
      '--artifacts-destination',
      `${mlflowDir}/artifacts`,
      '--host',
      'kdgat-login',
      '--port',
      String(MLFLOW_PORT),
      '--workers',
      '1',
      // MLflow answers only the Host headers it allows (DNS rebinding): the name the jobs use.
      '--allowed-hosts',
      `kdgat-login:${MLFLOW_PORT},kdgat-login`,
    ];
    expectOk(
      await site.ssh(
        `mkdir -p ${shq(mlflowDir)} && (nohup ${server.map(shq).join(' ')} >${shq(`${mlflowDir}/server.log`)} 2>&1 </dev/null & echo $! >${shq(`${mlflowDir}/server.pid`)})`,
      ),
    );
    await waitFor('the MLflow server on the login node', async () => {
      const r = await site.ssh(
        `${shq(venvPython)} -c ${shq(`import urllib.request; urllib.request.urlopen("http://kdgat-login:${MLFLOW_PORT}/health", timeout=5)`)}`,
      );
      return r.code === 0 || undefined;
    });
    const spec = writeSpec(
      name,
      [
        `name: ${name}`,
        'cluster: local',
        'environment: cpu-local',
        'requeue: { leadSeconds: 60, maxRestarts: 2 }',
        'stages:',
        '  - id: train',
        '    stage: autoencoder',
        '    model: vgae',
        '    scale: small',
        '    dataset: synth',
        '    overrides:',
        // Enough epochs that the signal, sent once the first checkpoint is seen, lands mid-run.
        '      training.max_epochs: 50',
        '      data.num_workers: 0',
        '      training.patience: 0',
        `      tracking.mlflow.uri: http://kdgat-login:${MLFLOW_PORT}`,
        `      tracking.mlflow.experiment: ${name}`,
        '    resources: { cpus: 1, memGB: 3, gpus: { count: 0 }, time: "0:20:00" }',
        '',
      ].join('\n'),
    );
    let ended: Run | undefined;
    const waiting = site.runner([...trainArgs(spec), '--wait']).then((r) => (ended = r));
    /** `probe`, failing at once with what the runner said once its --wait has ended (a job that failed). */
    const whileWaiting =
      <T>(probe: () => T | undefined | Promise<T | undefined>) =>
      async () => {
        if (ended) throw new Error(`the runner's --wait ended first: ${said(ended)}`);
        return probe();
      };
    // The run as the site has it (this test's own view of the site's files).
    const runsOf = site.onSite(`${SCRATCH}/runs/${name}`);
    const runDir = await waitFor(
      'the run directory on the site',
      whileWaiting(() =>
        existsSync(runsOf) ? readdirSync(runsOf).filter((d) => !d.includes('.partial.'))[0] : undefined,
      ),
    );
    const manifestFile = join(runsOf, runDir, 'manifest.json');
    const jobId = await waitFor(
      'the job id in the site manifest',
      whileWaiting(() => {
        const m = JSON.parse(readFileSync(manifestFile, 'utf8')) as { jobs: { jobId?: string }[] };
        return m.jobs[0]?.jobId;
      }),
    );
    const checkpoint = join(
      runsOf,
      runDir,
      'outputs',
      'synth',
      'vgae_small_autoencoder',
      'checkpoints',
      'last.ckpt',
    );
    await waitFor(
      `the first epoch's checkpoint ${checkpoint}`,
      whileWaiting(() => existsSync(checkpoint) || undefined),
    );
    // The SSH master of the waiting runner goes away (a laptop's network drops, a NAT forgets it).
    // (The laptop's TMPDIR is its own: another site's masters are not matched.)
    const masters = await site.laptop([
      'pkill',
      '-9',
      '-f',
      `^ssh: ${regexQuote(site.dir)}/laptop/tmp/hpc-ssh-.*master \\[mux\\]`,
    ]);
    expect(masters.code, said(masters)).toBe(0);
    // The job is signalled as SLURM does before a preemption or the time limit, and requeues itself.
    expectOk(await site.ssh(`scancel --signal=USR1 --batch ${jobId}`));
    await waitFor(
      `job ${jobId} requeued (Restarts=1, PENDING)`,
      whileWaiting(async () => {
        const job = (await site.ssh(`scontrol show job -o ${jobId}`)).out;
        return /Restarts=1/.test(job) && /JobState=PENDING/.test(job) ? job : undefined;
      }),
    );
    // SLURM holds a requeued batch job for a while (BeginTime); as the site's admin, release it now.
    expectOk(await site.ssh(`scontrol update JobId=${jobId} StartTime=now`));
    const r = await waiting;
    expectOk(r);
    expect(r.out).toMatch(/all 1 task\(s\) completed/);
    // One remote call per poll for the states, one more when the manifest changed: never one per job.
    // At the pace the stack's connection allows (site.ts: the box's login node takes 2 to 5 s).
    const calls = /--wait: (\d+) poll\(s\) \(every 2 to 5 s\), (\d+) remote call\(s\)/.exec(r.err);
    expect(calls, r.err).not.toBeNull();
    expect(Number(calls![2])).toBeLessThanOrEqual(2 * Number(calls![1]) + 8);
    const dirs = runDirsOf(r.out);
    const status = expectOk(await site.runner(['status', dirs.local]));
    expect(status.out).toMatch(/PREEMPTED_REQUEUED: .*requeued 1 time\(s\)/);
    const log = readdirSync(join(dirs.local, 'logs'))
      .map((f) => readFileSync(join(dirs.local, 'logs', f), 'utf8'))
      .join('\n');
    // MLflow: one run across the requeue, its epochs continuous, no step logged twice.
    const query = [
      'import json',
      'from mlflow import MlflowClient',
      `c = MlflowClient("http://kdgat-login:${MLFLOW_PORT}")`,
      `e = c.get_experiment_by_name("${name}")`,
      'runs = c.search_runs([e.experiment_id])',
      'h = [m.step for m in c.get_metric_history(runs[0].info.run_id, "epoch/val_loss")]',
      'print(json.dumps({"runs": len(runs), "status": runs[0].info.status, "steps": h}))',
    ].join('\n');
    const seen = expectOk(await site.ssh(`${shq(venvPython)} -c ${shq(query)}`));
    // What the server said besides 200 OK (for a failed check below), then it stops.
    const serverSaid = expectOk(
      await site.ssh(
        `grep -v -e '" 200 OK' -e 'huey' ${shq(`${mlflowDir}/server.log`)} | tail -n 40; ` +
          `kill "$(cat ${shq(`${mlflowDir}/server.pid`)})" && rm -rf ${shq(mlflowDir)}`,
      ),
    ).out;
    // What the job said of its trackers in both lives, and the server's log: what a failed MLflow
    // check below needs to be understood.
    const tracking = [
      ...log.split('\n').filter((l) => /tracking|mlflow|requeue|resum/i.test(l)),
      '--- the MLflow server on the login node:',
      serverSaid,
    ].join('\n');
    const mlflow = JSON.parse(seen.out.trim().split('\n').pop()!) as {
      runs: number;
      status: string;
      steps: number[];
    };
    expect(mlflow.runs, tracking).toBe(1);
    expect(mlflow.status, tracking).toBe('FINISHED');
    expect(mlflow.steps.length, tracking).toBeGreaterThan(1);
    expect(mlflow.steps, tracking).toEqual(mlflow.steps.map((_, i) => i));
    const jobs = await statusOf(dirs.local);
    expect(jobs[0]!.tasks[0]!.state).toBe('COMPLETED');
    expect(log).toMatch(/checkpoint acknowledged; requeueing job/);
    expect(log).toMatch(/resuming from .*last\.ckpt/);
  });

  it('--from-manifest reruns the recorded run on the site with byte-identical scripts and the same code', async () => {
    expect(chainRun, 'the chain test ran first').toBeDefined();
    const r = expectOk(
      await site.runner([
        'train',
        '--from-manifest',
        chainRun!.local,
        '--stack',
        site.stack,
        '--scheduler',
        'slurm',
        '--wait',
      ]),
    );
    expect(r.out).toMatch(/re-rendered scripts are byte-identical to the recorded ones/);
    expect(r.out).toMatch(/all 3 task\(s\) completed/);
    expect(r.out).toMatch(/already on the site at/);
    const again = runDirsOf(r.out);
    const first = JSON.parse(readFileSync(join(chainRun!.local, 'manifest.json'), 'utf8')) as {
      code: unknown;
    };
    const second = JSON.parse(readFileSync(join(again.local, 'manifest.json'), 'utf8')) as {
      code: unknown;
      submission: { reproducedFrom: string };
    };
    expect(second.code).toEqual(first.code);
    expect(second.submission.reproducedFrom).toBe(chainRun!.site);
  });

  it('cancel from the laptop cancels the jobs on the site', async () => {
    // Two long stages (the graph cache exists from the chain): the running job cannot finish first.
    const spec = writeSpec(
      'long',
      chainSpec('site-cancel', 200)
        .replace(/ {2}- id: preprocess\n[\s\S]*?(?= {2}- id: autoencoder)/, '')
        .replace('    dependsOn: [preprocess]\n', ''),
    );
    const r = expectOk(await site.runner(trainArgs(spec)));
    const dirs = runDirsOf(r.out);
    await waitFor(
      'the first job to run',
      async () =>
        (await statusOf(dirs.local)).some((j) => j.tasks.some((t) => t.state === 'RUNNING')) || undefined,
    );
    const c = expectOk(await site.runner(['cancel', dirs.local]));
    expect(c.out).toMatch(/^cancelled /m);
    const states = await waitFor('every job cancelled', async () => {
      const jobs = await statusOf(dirs.local);
      return jobs.every((j) => j.tasks.every((t) => t.state === 'CANCELLED')) ? jobs : undefined;
    });
    expect(states.length).toBe(2);
    // The manifest on the site saw it too (the laptop wrote it there).
    const onSite = JSON.parse(readFileSync(join(site.onSite(dirs.site), 'manifest.json'), 'utf8')) as {
      jobs: { lastSeen?: { state: string } }[];
    };
    expect(JSON.stringify(onSite.jobs)).toMatch(/CANCELLED/);
  });
  it("a researcher's own pipeline (tiny-lightning): its code and environment, a preemption Lightning requeues itself, records, sizes and the report", async () => {
    // examples/pipelines/tiny-lightning knows nothing of kdgat-hpc: its declaration and environment
    // file are all the runner is told. Its code reaches the site only as the run's snapshot.
    const name = `tiny-${Date.now().toString(36)}`;
    const examples = join(REPO, 'examples', 'pipelines');
    const spec = writeSpec(
      name,
      [
        `name: ${name}`,
        'cluster: local',
        `environment: ${join(examples, 'tiny-lightning.environment.yaml')}`,
        `pipeline: ${join(examples, 'tiny-lightning.pipeline.yaml')}`,
        'stages:',
        '  - id: fit',
        '    stage: train',
        '    model: mlp',
        '    scale: small',
        '    dataset: synth',
        '    overrides: { max_epochs: 4, epoch_sleep: 4, lr: 0.02 }',
        '    resources: { cpus: 1, memGB: 3, gpus: { count: 0 }, time: "0:20:00" }',
        '',
      ].join('\n'),
    );
    // A bad override is refused against the project's own schema before anything is queued.
    const bad = await site.runner([
      'plan',
      '--spec',
      writeSpec(`${name}-bad`, readFileSync(spec, 'utf8').replace('lr: 0.02', 'lr: -1')),
      '--stack',
      site.stack,
    ]);
    expect(bad.code, said(bad)).toBe(2);
    expect(bad.err).toMatch(
      /stages\[0\]\.overrides\.lr: lr = -1 is not valid for the pipeline \(expected a number > 0/,
    );
    expectOk(await site.runner(['plan', '--spec', spec, '--stack', site.stack, '--scheduler', 'slurm']));

    const runsOf = site.onSite(`${SCRATCH}/runs/${name}`);
    const planned = new Set(existsSync(runsOf) ? readdirSync(runsOf) : []); // plan's own run dirs
    const waiting = site.runner([...trainArgs(spec), '--wait']);
    const runDir = await waitFor('the run directory of train on the site', () =>
      existsSync(runsOf)
        ? readdirSync(runsOf).filter((d) => !d.includes('.partial.') && !planned.has(d))[0]
        : undefined,
    );
    const manifestFile = join(runsOf, runDir, 'manifest.json');
    const jobId = await waitFor('the job id in the site manifest', () => {
      const m = JSON.parse(readFileSync(manifestFile, 'utf8')) as { jobs: { jobId?: string }[] };
      return m.jobs[0]?.jobId;
    });
    const stageDir = join(runsOf, runDir, 'outputs', 'synth', 'mlp_small_train');
    await waitFor(
      'the first epoch of the project on the site',
      () => existsSync(join(stageDir, 'checkpoints', 'last.ckpt')) || undefined,
    );
    // Preempted as SLURM does it: the signal the job asked for, to the batch shell, which forwards it;
    // Lightning saves hpc_ckpt_1.ckpt and runs `scontrol requeue` itself.
    expectOk(await site.ssh(`scancel --signal=USR1 --batch ${jobId}`));
    await waitFor(`job ${jobId} requeued by Lightning (Restarts=1, PENDING)`, async () => {
      const job = (await site.ssh(`scontrol show job -o ${jobId}`)).out;
      return /Restarts=1/.test(job) && /JobState=PENDING/.test(job) ? job : undefined;
    });
    expectOk(await site.ssh(`scontrol update JobId=${jobId} StartTime=now`));
    const r = await waiting;
    expectOk(r);
    expect(r.out).toMatch(/all 1 task\(s\) completed/);
    const dirs = runDirsOf(r.out);
    expect((await statusOf(dirs.local))[0]!.tasks[0]!.state).toBe('COMPLETED');
    const local = join(dirs.local, 'outputs', 'synth', 'mlp_small_train');
    // The project finished all its epochs, resumed from its own hpc checkpoint after the requeue.
    expect(JSON.parse(readFileSync(join(local, 'metrics.json'), 'utf8'))).toMatchObject({ epochs: 4 });
    const logs = readdirSync(join(dirs.local, 'logs'))
      .map((f) => readFileSync(join(dirs.local, 'logs', f), 'utf8'))
      .join('\n');
    expect(logs).toMatch(new RegExp(`SIGTERM after the pipeline requeued job ${jobId} itself`));
    expect(logs).toMatch(/Restoring states from the checkpoint path at \S+hpc_ckpt_1\.ckpt/);
    expect(logs).toMatch(
      /running python -m tiny_lightning\.cli train --model mlp --scale small --dataset synth --output-dir \S+ max_epochs=4 epoch_sleep=4 lr=0\.02/,
    );
    // The job records of both attempts, as every job leaves them.
    const records = readFileSync(join(local, 'job_record.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { state: string; restart: number });
    expect(records.map((x) => [x.state, x.restart])).toEqual([
      ['REQUEUED', 0],
      ['COMPLETED', 1],
    ]);
    // plan sizes the stage from that history; the report shows the project's own curves and says
    // what of it is kdgat's.
    const again = expectOk(
      await site.runner(['plan', '--spec', spec, '--stack', site.stack, '--scheduler', 'slurm']),
    );
    expect(again.out).toMatch(/fit: from 1 finished task\(s\) of 1 run\(s\)/);
    expectOk(await site.runner(['report', dirs.local]));
    const html = readFileSync(join(dirs.local, 'report', 'report.html'), 'utf8');
    expect(html).toContain('<h2>Pipeline tiny-lightning</h2>');
    expect(html).toContain('curves from the pipeline&#x27;s per-epoch history (csv/metrics.csv');
    expect(existsSync(join(dirs.local, 'report', 'fit-curves.png'))).toBe(true);
  });

  it("a pipeline whose code is a git repository at a commit runs that commit's code on the site", async () => {
    // The researcher's repository: tiny-lightning at one commit, then a later commit that removes its
    // training code. The declaration names the first commit, so only its code can make the job pass.
    const name = `tinygit-${Date.now().toString(36)}`;
    const examples = join(REPO, 'examples', 'pipelines');
    const repo = mkdtempSync(join(tmpdir(), 'hpc-their-repo-'));
    cpSync(join(examples, 'tiny-lightning'), repo, { recursive: true });
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=r', '-c', 'user.email=r@example.org', ...args], {
        cwd: repo,
        encoding: 'utf8',
      }).trim();
    git('init', '--quiet');
    git('add', '-A');
    git('commit', '--quiet', '-m', 'tiny-lightning as it trains');
    const commit = git('rev-parse', 'HEAD');
    git('rm', '--quiet', 'src/tiny_lightning/train.py');
    git('commit', '--quiet', '-m', 'later: the training code moved away');
    const declaration = readFileSync(join(examples, 'tiny-lightning.pipeline.yaml'), 'utf8')
      .replace(/^name: .*$/m, `name: ${name}`)
      .replace(/^code: .*$/m, `code: { git: { url: ${repo}, commit: ${commit} }, pythonPath: [src] }`)
      .replace('file: tiny-lightning.schema.json', `file: ${join(examples, 'tiny-lightning.schema.json')}`);
    const declarationFile = join(site.dir, `${name}.pipeline.yaml`);
    writeFileSync(declarationFile, declaration);
    const spec = writeSpec(
      name,
      [
        `name: ${name}`,
        'cluster: local',
        `environment: ${join(examples, 'tiny-lightning.environment.yaml')}`,
        `pipeline: ${declarationFile}`,
        'stages:',
        '  - id: fit',
        '    stage: train',
        '    model: mlp',
        '    scale: small',
        '    dataset: synth',
        '    overrides: { max_epochs: 1 }',
        '    resources: { cpus: 1, memGB: 3, gpus: { count: 0 }, time: "0:10:00" }',
        '',
      ].join('\n'),
    );
    const r = expectOk(await site.runner([...trainArgs(spec), '--wait']));
    expect(r.out).toMatch(/all 1 task\(s\) completed/);
    expect(r.out + r.err).toContain(`pipeline ${name} at ${commit.slice(0, 12)} from ${repo}`);
    const dirs = runDirsOf(r.out);
    const manifest = JSON.parse(readFileSync(join(site.onSite(dirs.site), 'manifest.json'), 'utf8')) as {
      code: { commit: string; dir: string };
    };
    expect(manifest.code.commit).toBe(commit);
    expect(existsSync(join(site.onSite(manifest.code.dir), 'src', 'tiny_lightning', 'train.py'))).toBe(true);
    const local = join(dirs.local, 'outputs', 'synth', 'mlp_small_train');
    expect(JSON.parse(readFileSync(join(local, 'metrics.json'), 'utf8'))).toMatchObject({ epochs: 1 });
  });

  it("a researcher's own repository is the workspace: runner init, a teacher → student chain over SSH, a requeue, report and --from-manifest", async () => {
    // Their repository, outside this checkout: tiny-lightning as a research project of that shape —
    // Lightning's own CSVLogger (a version_<n> folder per attempt), its raw data only through
    // $TINY_RAW_ROOT (refused without it), a student that distils from --teacher-path.
    const repo = join(site.dir, 'laptop', 'kd-research');
    cpSync(join(REPO, 'examples', 'pipelines', 'tiny-lightning'), repo, { recursive: true });
    const trainPy = join(repo, 'src', 'tiny_lightning', 'train.py');
    const appending =
      'logger=AppendingCSVLogger(output_dir, name="csv", version="", flush_logs_every_n_steps=1),';
    expect(readFileSync(trainPy, 'utf8')).toContain(appending);
    writeFileSync(
      trainPy,
      readFileSync(trainPy, 'utf8').replace(
        appending,
        'logger=CSVLogger(output_dir, name="logs", flush_logs_every_n_steps=1),',
      ),
    );
    const cliPy = join(repo, 'src', 'tiny_lightning', 'cli.py');
    const teacherCheck = '    if args.teacher_path is not None and not args.teacher_path.is_file():';
    expect(readFileSync(cliPy, 'utf8')).toContain(teacherCheck);
    writeFileSync(
      cliPy,
      readFileSync(cliPy, 'utf8').replace(
        teacherCheck,
        [
          '    import os',
          '    raw = os.environ.get("TINY_RAW_ROOT", "")',
          '    if not os.path.isdir(os.path.join(raw, args.dataset)):',
          '        parser.exit(2, f"TINY_RAW_ROOT={raw!r}: no raw data for {args.dataset} there\\n")',
          '    print(f"raw data: {os.path.join(raw, args.dataset)}", flush=True)',
          teacherCheck,
        ].join('\n'),
      ),
    );
    const git = (...args: string[]) =>
      execFileSync('git', ['-C', repo, '-c', 'user.email=r@lab', '-c', 'user.name=r', ...args], {
        encoding: 'utf8',
      }).trim();
    git('init', '--quiet');
    git('add', '-A');
    git('commit', '--quiet', '-m', 'the research code');
    const ours = execFileSync('git', ['-C', REPO, 'status', '--porcelain'], { encoding: 'utf8' });

    // runner init reads the repository; the test fills what it could not know, as the researcher would.
    const init = expectOk(await site.runner(['init', repo]));
    expect(init.out).toMatch(
      /found project tiny-lightning \(Python 3\.11\), its uv\.lock, CLI python -m tiny_lightning\.cli .*Lightning, its CSVLogger, ModelCheckpoint in checkpoints\//,
    );
    expect(init.out).toMatch(/next: fill the \d+ lines marked TODO\(kdgat-hpc\)/);
    const pipelineFile = join(repo, 'hpc', 'tiny-lightning.pipeline.yaml');
    const pipeline = readFileSync(pipelineFile, 'utf8');
    expect(pipeline).toContain('"history":"logs/version_*/metrics.csv"');
    expect(pipeline).toContain('"checkpoint":["checkpoints/last.ckpt","hpc_ckpt_*.ckpt"]');
    expect(pipeline).toContain('requeue: lightning');
    writeFileSync(
      pipelineFile,
      pipeline.replace(
        /^# TODO\(kdgat-hpc\): rawData.*$/m,
        'rawData: { variable: TINY_RAW_ROOT, points: root }',
      ),
    );
    // The stack: this box, as a second project of the group (its own scratch and environments).
    const stack = `${site.stack}-kd`;
    const config = siteStackConfig(site.facts) as { clusterOverrides: { paths: Record<string, string> } };
    const own = (p: string) => p.replace('/kd-gat', '/kd-research');
    const paths = Object.fromEntries(
      Object.entries(config.clusterOverrides.paths).map(([k, v]) => [k, own(v)]),
    );
    const stackConfig = {
      ...config,
      clusterOverrides: { ...config.clusterOverrides, paths },
      clusters: [],
      environments: [{ file: 'hpc/tiny-lightning.environment.yaml' }],
      datasets: ['synth'],
    };
    writeFileSync(
      join(repo, 'stacks', `${stack}.yaml`),
      stringify({
        config: Object.fromEntries(Object.entries(stackConfig).map(([k, v]) => [`kdgat-hpc:${k}`, v])),
      }),
    );
    const specFile = join(repo, 'hpc', 'specs', 'kd.yaml');
    const stage = (id: string, scale: string, extra: string[]) =>
      [
        `  - id: ${id}`,
        '    stage: train',
        '    model: mlp',
        `    scale: ${scale}`,
        '    dataset: synth',
        ...extra,
        '    resources: { cpus: 1, memGB: 3, gpus: { count: 0 }, time: "0:20:00" }',
      ].join('\n');
    writeFileSync(
      specFile,
      [
        'name: kd-research',
        'cluster: local',
        'environment: ../tiny-lightning.environment.yaml',
        'pipeline: ../tiny-lightning.pipeline.yaml',
        'stages:',
        stage('teacher', 'large', ['    overrides: { max_epochs: 2 }']),
        stage('student', 'small', [
          '    args: [--teacher-path, "{output:teacher.checkpoint}"]',
          '    overrides: { max_epochs: 4, epoch_sleep: 4 }',
        ]),
        '',
      ].join('\n'),
    );
    git('add', '-A');
    git('commit', '--quiet', '-m', 'kdgat-hpc workspace');

    // Everything from the workspace: its stack file, its own Pulumi state, its .hpc/ for local copies.
    const env = { ...site.env };
    delete env['HPC_INFRA_DIR'];
    delete env['PULUMI_BACKEND_URL'];
    const ws = ['--workspace', repo];
    expectOk(await site.runner(['infra', 'up', '--stack', stack, ...ws, '--', '--summary'], { env }));
    expect(existsSync(join(repo, '.hpc', 'pulumi-state', '.pulumi'))).toBe(true);
    // Pulumi keeps the stack's secrets salt in its config file, as in any Pulumi project: the
    // researcher commits it with the stack; nothing else of theirs changed.
    expect(git('status', '--porcelain')).toBe(`M stacks/${stack}.yaml`);
    expect(git('diff')).toMatch(/^\+encryptionsalt: /m);
    git('commit', '--quiet', '-am', "the stack's secrets salt");
    const planned = expectOk(
      await site.runner(['plan', '--spec', specFile, '--stack', stack, '--scheduler', 'slurm', ...ws], {
        env,
      }),
    );
    expect(planned.out).toMatch(/student: job/);

    const runsOf = site.onSite(`${own(SCRATCH)}/runs/kd-research`);
    const before = new Set(existsSync(runsOf) ? readdirSync(runsOf) : []);
    const waiting = site.runner(
      ['train', '--spec', specFile, '--stack', stack, '--scheduler', 'slurm', '--wait', ...ws],
      {
        env,
      },
    );
    const runDir = await waitFor('the run directory on the site', () =>
      existsSync(runsOf)
        ? readdirSync(runsOf).filter((d) => !d.includes('.partial.') && !before.has(d))[0]
        : undefined,
    );
    const manifestFile = join(runsOf, runDir, 'manifest.json');
    const studentJob = await waitFor('the student job id in the site manifest', () => {
      const m = JSON.parse(readFileSync(manifestFile, 'utf8')) as { jobs: { key: string; jobId?: string }[] };
      return m.jobs.find((j) => j.key === 'student')?.jobId;
    });
    const studentDir = join(runsOf, runDir, 'outputs', 'synth', 'mlp_small_train');
    await waitFor(
      "the student's first epoch",
      () => existsSync(join(studentDir, 'checkpoints', 'last.ckpt')) || undefined,
    );
    expectOk(await site.ssh(`scancel --signal=USR1 --batch ${studentJob}`));
    await waitFor(`the student ${studentJob} requeued by Lightning`, async () => {
      const job = (await site.ssh(`scontrol show job -o ${studentJob}`)).out;
      return /Restarts=1/.test(job) && /JobState=PENDING/.test(job) ? job : undefined;
    });
    expectOk(await site.ssh(`scontrol update JobId=${studentJob} StartTime=now`));
    const r = expectOk(await waiting);
    expect(r.out).toMatch(/all 2 task\(s\) completed/);
    const dirs = runDirsOf(r.out);
    expect(dirs.local.startsWith(join(repo, '.hpc', 'sites', stack))).toBe(true);
    const local = join(dirs.local, 'outputs', 'synth', 'mlp_small_train');
    const logs = readdirSync(join(dirs.local, 'logs'))
      .map((f) => readFileSync(join(dirs.local, 'logs', f), 'utf8'))
      .join('\n');
    // The raw data came through the variable the stack's rawDataRoot set; the student read the
    // teacher's declared checkpoint on the site, and resumed from Lightning's own after the requeue.
    expect(logs).toMatch(/raw data: \/fs\/ess\/data\/raw\/synth/);
    expect(logs).toMatch(
      /distilling from \S+\/mlp_large_train\/checkpoints\/last\.ckpt \(teacher hidden=256/,
    );
    expect(logs).toMatch(/Restoring states from the checkpoint path at \S+hpc_ckpt_1\.ckpt/);
    expect(readdirSync(join(local, 'logs')).sort()).toEqual(['version_0', 'version_1']);
    expect(JSON.parse(readFileSync(join(local, 'metrics.json'), 'utf8'))).toMatchObject({ epochs: 4 });
    const manifest = JSON.parse(readFileSync(join(dirs.local, 'manifest.json'), 'utf8')) as {
      jobs: { key: string; reads?: unknown }[];
    };
    expect(JSON.stringify(manifest)).toContain('mlp_large_train/checkpoints/last.ckpt');

    // The report merges the two attempts' histories in order and shows the scores; runs has the rows.
    expectOk(await site.runner(['report', dirs.local, ...ws], { env }));
    const html = readFileSync(join(dirs.local, 'report', 'report.html'), 'utf8');
    expect(html).toContain('<h2>Pipeline tiny-lightning</h2>');
    expect(html).toContain('logs/version_*/metrics.csv');
    // (The catalogue's row of each stage is not asserted: the epilog writes it with the helper module
    // of the default pipeline, which this pipeline's environment does not have — it says so in the
    // job log, `catalogue: no row written: … No module named …`; open in issue 44.)
    const again = expectOk(
      await site.runner(
        ['plan', '--from-manifest', dirs.local, '--stack', stack, '--scheduler', 'slurm', ...ws],
        {
          env,
        },
      ),
    );
    expect(again.out + again.err).toMatch(/byte/i);
    // Nothing tracked was written: not in their repository (the runner's .hpc/ ignores itself), not in ours.
    expect(git('status', '--porcelain')).toBe('');
    expect(execFileSync('git', ['-C', REPO, 'status', '--porcelain'], { encoding: 'utf8' })).toBe(ours);
  });

  it('with the site unreachable, status, logs and report show the local copy and say how old it is', async () => {
    expect(chainRun, 'the chain test ran first').toBeDefined();
    // The login node goes away (its sshd stops; the cluster behind it keeps running).
    const pid = readFileSync(join(site.siteRoot, 'ssh', 'sshd.pid'), 'utf8').trim();
    process.kill(Number(pid), 'SIGTERM');
    const status = await site.runner(['status', chainRun!.local]);
    expect(status.code, said(status)).toBe(1);
    expect(status.err).toMatch(
      /the site could not be reached .*: showing the local copy .*, as brought back \S+ — older than the site/,
    );
    expect(status.err).toMatch(/the states below are the last ones the runner saw/);
    expect(status.out).toMatch(/curriculum .*COMPLETED/);
    const logs = expectOk(
      await site.runner(['logs', chainRun!.local, '--job', 'curriculum', '--lines', '5']),
    );
    expect(logs.err).toMatch(/older than the site/);
    expectOk(await site.runner(['report', chainRun!.local]));
  });
});
