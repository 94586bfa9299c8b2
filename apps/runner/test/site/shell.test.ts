// `runner shell` from the laptop through a real terminal: tmux on the laptop (its own socket under
// the site's directory) runs the runner, whose `ssh -t` reaches the login node, where salloc and
// SLURM's interactive step put a shell on a compute node; the test types into it (send-keys) and
// reads the screen (capture-pane), with a deadline on every wait. Needs root (namespaces) and the
// bootstrap (tmux); run by scripts/test.sh with the other site tests.
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, SCRATCH, expectOk, startSite, waitFor, type SshSite } from './site.ts';

const RUNNER = join(REPO, 'apps', 'runner', 'bin', 'kdgat-runner.js');
/** How long one thing on the terminal may take to appear (a deadline, not a speed check). */
const SCREEN_MS = 180_000;

let site: SshSite;
let socket: string;

/** tmux on the laptop, on this test's own server. */
const tmux = (...args: string[]) => site.laptop(['tmux', '-S', socket, ...args]);

/** Where this test's part of the terminal starts (what earlier tests left is not looked at). */
let mark = 0;

/** What the terminal showed since `mark` (its history included, wrapped lines joined). */
async function screen(): Promise<string> {
  return expectOk(await tmux('capture-pane', '-p', '-J', '-S', '-', '-t', 'runner')).out.slice(mark);
}

/** From now on, only what the terminal shows next is looked at. */
async function markScreen(): Promise<void> {
  mark = 0;
  mark = (await screen()).trimEnd().length;
}

/** Types a line into the terminal, as a user would, and presses Enter. */
async function type(line: string): Promise<void> {
  expectOk(await tmux('send-keys', '-t', 'runner', '-l', line));
  expectOk(await tmux('send-keys', '-t', 'runner', 'Enter'));
}

/** Polls the screen (every second, up to SCREEN_MS) until `pattern` matches; says what it waited for. */
async function seen(what: string, pattern: RegExp): Promise<RegExpExecArray> {
  const deadline = Date.now() + SCREEN_MS;
  for (;;) {
    const text = await screen();
    const m = pattern.exec(text);
    if (m) return m;
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${SCREEN_MS / 1000} s waiting for ${what}; the screen:\n${text.slice(-4000)}`,
      );
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/**
 * Prints `KDGAT-<key>=<value>` from the shell: the typed line spells the marker `KD""GAT`, so only
 * the output matches.
 */
async function ask(key: string, shellWords: string): Promise<string> {
  await type(`echo "KD""GAT-${key}=${shellWords}"`);
  return (await seen(`${key} from the shell`, new RegExp(`^KDGAT-${key}=(.*)$`, 'm')))[1]!.trim();
}

beforeAll(async () => {
  site = await startSite();
  // Setup only (site.test.ts checks what up provisions): no preview before the update.
  expectOk(await site.pulumi('up', ['--summary', '--skip-preview']));
  // The stage's dataset cache, as preprocess leaves it on the site's scratch (its job stages it).
  const cache = site.onSite(`${SCRATCH}/cache/synth`);
  mkdirSync(cache, { recursive: true });
  writeFileSync(join(cache, 'meta.json'), '{"dataset": "synth"}\n');
  writeFileSync(join(cache, 'graphs.pt'), 'graphs of the shell test\n');
  socket = join(site.dir, 'laptop', 'tmux.sock');
  // The laptop's terminal: a login shell in tmux, with the laptop's environment (the stack's backend).
  expectOk(
    await site.laptop([
      'tmux',
      '-S',
      socket,
      'new-session',
      '-d',
      '-s',
      'runner',
      '-x',
      '200',
      '-y',
      '50',
      'bash --norc --noprofile -i',
    ]),
  );
}, 600_000);

afterAll(async () => {
  if (socket) await tmux('kill-server').catch(() => undefined);
  site?.stop();
});

/** Types the runner's command line into the terminal; `runner-exit=N` follows its end. */
async function runRunner(args: string[]): Promise<void> {
  await markScreen();
  await type(`${['node', RUNNER, ...args].join(' ')}; echo "runner-exit=$?"`);
}

/**
 * Leaves the shell and checks the allocation is released: the runner says so, the queue is empty
 * (on `cluster`, another of the site's, when given: -M).
 */
async function leave(jobId: string, cluster?: string): Promise<void> {
  const m = cluster ? `-M ${cluster} ` : '';
  await type('exit');
  await seen('the runner to end', /^runner-exit=0$/m);
  expect(await screen()).toMatch(/^shell: ended \(salloc exited 0\); the allocation is released$/m);
  await waitFor(`job ${jobId} gone from the queue`, async () => {
    const r = expectOk(await site.ssh(`squeue ${m}-h -o %i`));
    return !new RegExp(`^${jobId}$`, 'm').test(r.out) || undefined;
  });
  const state = await waitFor(`job ${jobId} in sacct`, async () => {
    const r = await site.ssh(`sacct ${m}-n -X -j ${jobId} -o State%20`);
    return r.code === 0 && r.out.trim() !== '' ? r.out.trim() : undefined;
  });
  expect(state).toBe('COMPLETED');
  // The init lies in the site user's own directory (mode 700), and is removed when the shell ends.
  const own = site.onSite(`${SCRATCH}/shells/${site.user}`);
  expect(statSync(own).mode & 0o777).toBe(0o700);
  expect(readdirSync(own), 'the init is removed when the shell ends').toEqual([]);
}

describe('runner shell', () => {
  it("of a spec's stage: a compute node of its partition, its resources, environment, code snapshot and staged cache; exit releases it", async () => {
    const started = Date.now();
    const spec = join(site.dir, 'laptop', 'shell.yaml');
    writeFileSync(
      spec,
      [
        'name: site-shell',
        'cluster: local',
        'environment: cpu-local',
        'staging: { enabled: true }',
        'stages:',
        '  - id: train',
        '    stage: autoencoder',
        '    model: vgae',
        '    scale: small',
        '    dataset: synth',
        '    resources: { cpus: 1, memGB: 3, gpus: { count: 0 }, time: "0:20:00" }',
        '',
      ].join('\n'),
    );
    await runRunner([
      'shell',
      '--spec',
      spec,
      '--stage',
      'train',
      '--stack',
      site.stack,
      '--scheduler',
      'slurm',
    ]);

    // Before anything is allocated: what it charges and the account.
    const jobId = (await seen('the allocation', /^salloc: Granted job allocation (\d+)$/m))[1]!;
    const text = await screen();
    expect(text).toMatch(
      /^shell: stage train of site-shell \(spec [0-9a-f]{8}\) on stack site-\S+, as its job sees it$/m,
    );
    expect(text).toMatch(
      /^charging \(local; .*\): 1 billed core\(s\) on gpu; worst \(held to the time limit 0:20:00\) 0\.0000 GPU-h, 0\.3333 core-h, 0\.3333 SU; less when the shell ends sooner$/m,
    );
    expect(text).toMatch(
      /^account: none named \(cluster profile local names none: SLURM charges your default account\)$/m,
    );
    expect(text.indexOf('charging (')).toBeLessThan(text.indexOf('allocating: salloc'));
    expect(text.indexOf('allocating: salloc')).toBeLessThan(text.indexOf('salloc: Granted'));
    await seen('the shell ready', /^kdgat-hpc shell: exit this shell to end the allocation$/m);

    // The shell: on a compute node of the stage's partition, in the job, with its resources.
    const host = await ask('host', '$(hostname)');
    expect(['c01', 'c02']).toContain(host);
    expect(await ask('job', '$SLURM_JOB_ID')).toBe(jobId);
    expect(await ask('partition', '$SLURM_JOB_PARTITION')).toBe('gpu');
    expect(await ask('cpus', '$(nproc)')).toBe('1');
    // The job's node-local $TMPDIR (the box's prolog makes it per job), the cache staged into it.
    expect(await ask('tmpdir', '$TMPDIR')).toBe(`/tmp/job.${jobId}`);
    expect(await ask('cache', '$KD_GAT_CACHE_ROOT')).toBe(`/tmp/job.${jobId}/hpc-cache`);
    expect(await ask('staged', '$(cat $KD_GAT_CACHE_ROOT/synth/graphs.pt)')).toBe('graphs of the shell test');
    // The environment and the run's code snapshot: kdgat is imported from the snapshot on scratch.
    await type(`python -c 'import kdgat, torch_geometric; print("KD" "GAT-python=" + kdgat.__file__)'`);
    const kdgat = (
      await seen('python importing kdgat and torch_geometric', /^KDGAT-python=(.*)$/m)
    )[1]!.trim();
    expect(kdgat).toMatch(new RegExp(`^${SCRATCH}/code/${site.user}/[0-9a-f]{40}/src/kdgat/__init__\\.py$`));
    // The site sees the allocation, under the shell's name, while the shell is open.
    const queued = expectOk(await site.ssh(`squeue -h -j ${jobId} -o '%j %P %T %N'`)).out.trim();
    expect(queued).toBe(`kdgat-site-shell-train-shell gpu RUNNING ${host}`);
    expect(readdirSync(site.onSite(`${SCRATCH}/shells`))).toHaveLength(1);

    await leave(jobId);
    console.log(
      `the terminal (${((Date.now() - started) / 1000).toFixed(0)} s from typing the command to the queue empty):\n${await screen()}`,
    );
  });

  it("without a spec: the stack's cluster profile, its default partition with a GPU, the scratch caches", async () => {
    await runRunner(['shell', '--stack', site.stack, '--time', '0:10:00']);
    const jobId = (await seen('the allocation', /^salloc: Granted job allocation (\d+)$/m))[1]!;
    // The box's profile (the stack's configuration): 2 cores, 1 GPU at 1 and 10 SU an hour.
    expect(await screen()).toMatch(
      /^charging \(kdgat-site; .*\): 2 billed core\(s\) \+ 1 GPU\(s\) on gpu; worst \(held to the time limit 0:10:00\) 0\.1667 GPU-h, 0\.3333 core-h, 2\.00 SU;/m,
    );
    await seen('the shell ready', /^kdgat-hpc shell: exit this shell to end the allocation$/m);
    expect(['c01', 'c02']).toContain(await ask('nohost', '$(hostname)'));
    // The profile's CUDA module, loaded as a job of this profile loads it (the box's Lmod tree).
    expect(await ask('nomodules', '$LOADEDMODULES')).toBe('cuda/12.4.1');
    expect(await ask('nopartition', '$SLURM_JOB_PARTITION')).toBe('gpu');
    expect(await ask('nogpus', '$SLURM_GPUS_ON_NODE')).toBe('1');
    // Nothing staged, as a job that stages nothing: the scratch caches.
    expect(await ask('nocache', '$KD_GAT_CACHE_ROOT')).toBe(`${SCRATCH}/cache`);
    await leave(jobId);
  });

  it("--cluster: a shell on the site's second cluster (salloc -M from the same login node), at its rates", async () => {
    const annex = site.facts['ANNEX_CLUSTER']!;
    await runRunner(['shell', '--stack', site.stack, '--cluster', annex, '--time', '0:10:00']);
    const jobId = (await seen('the allocation', /^salloc: Granted job allocation (\d+)/m))[1]!;
    const text = await screen();
    expect(text).toMatch(
      new RegExp(`^ {2}cluster: kdgat-annex \\(-M ${annex}\\), one of the site's clusters$`, 'm'),
    );
    // The annex's own rates (twice the first cluster's): 2 cores and 1 GPU for 10 minutes.
    expect(text).toMatch(
      /^charging \(kdgat-annex; .*\): 2 billed core\(s\) \+ 1 GPU\(s\) on gpu; worst \(held to the time limit 0:10:00\) 0\.1667 GPU-h, 0\.3333 core-h, 4\.00 SU;/m,
    );
    expect(text).toMatch(new RegExp(`^allocating: salloc --clusters=${annex} `, 'm'));
    await seen('the shell ready', /^kdgat-hpc shell: exit this shell to end the allocation$/m);
    // On the annex's one node, in the annex's job, its GPU type in the allocation.
    expect(await ask('annexhost', '$(hostname)')).toBe(site.facts['ANNEX_NODES']);
    expect(await ask('annexcluster', '$SLURM_CLUSTER_NAME')).toBe(annex);
    expect(await ask('annexjob', '$SLURM_JOB_ID')).toBe(jobId);
    // The allocation is the annex's: the first cluster's queue is empty.
    expect(expectOk(await site.ssh('squeue -h -o %i')).out.trim()).toBe('');
    expect(expectOk(await site.ssh(`squeue -M ${annex} -h -j ${jobId} -o '%j %P %T %N'`)).out).toMatch(
      new RegExp(`^kdgat-shell-gpu-shell gpu RUNNING ${site.facts['ANNEX_NODES']}$`, 'm'),
    );
    await leave(jobId, annex);
  });
});
