import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pitzer } from './fixtures.test-support.ts';
import { jobInput, makeSite, writeJob } from './test-support/job-harness.ts';
import { makeSandbox } from './test-support/sandbox.ts';
import { NO_SLURM_HERE, runsHere } from './test-support/skips.ts';

// The requeue handshake under a real SLURM: `--signal=B:USR1@<lead>` reaches the batch shell, the
// trap forwards it to the (stub) pipeline, which acknowledges; the script runs the real
// `scontrol requeue`, and SLURM counts the restart.
// Only python, module and conda are stubs. The job is cancelled once the requeue is seen (SLURM
// holds a requeued job for about two minutes before it may start again).
const EPILOG_END = `${'='.repeat(58)}\n`; // the epilog's last line
const sh = (cmd: string, args: string[]) =>
  spawnSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const slurmUp = sh('scontrol', ['ping']).stdout?.includes('is UP') ?? false;
const sb = makeSandbox({ stubs: ['python', 'module', 'conda'] });
afterAll(() => sb.cleanup());

const slurmHere = runsHere(slurmUp, 'the requeue handshake under real SLURM', NO_SLURM_HERE);

describe.runIf(slurmHere)('requeue handshake under real SLURM', () => {
  it('signals, checkpoints and requeues with scontrol', async () => {
    const site = makeSite(sb, {
      profile: {
        ...pitzer,
        name: 'local-slurm',
        clusterName: 'local',
        account: undefined,
        accountRequired: false,
      },
    });
    const base = jobInput(site);
    const input = jobInput(site, {
      stage: { ...base.stage, resources: { ...base.stage.resources, cpus: 1, memGB: 1, time: '0:02:00' } },
      requeue: { enabled: true, signal: 'USR1', leadSeconds: 100, maxRestarts: 2 },
    });
    const script = writeJob(sb, input);
    mkdirSync(site.layout.logsDir, { recursive: true }); // sbatch does not create the --output directory
    const submit = spawnSync('sbatch', ['--parsable', `--chdir=${sb.dir}`, script], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        PATH: `${sb.bin}:${process.env.PATH}`,
        STUB_LOG: sb.log,
        STUB_PYTHON_MODE: 'requeue',
        STUB_PYTHON_WAIT_STEPS: '4000',
      },
    });
    expect(submit.stderr).toBe('');
    const jobId = submit.stdout.trim().split(';')[0] ?? '';
    try {
      let restarts = 0;
      for (let i = 0; i < 120 && restarts === 0; i++) {
        await new Promise((r) => setTimeout(r, 1000));
        restarts = Number(/Restarts=(\d+)/.exec(sh('scontrol', ['show', 'job', jobId]).stdout)?.[1] ?? 0);
      }
      expect(restarts).toBe(1);
      // The requeued job's processes get SIGTERM; the epilog still reports. Wait for its last line.
      const logPath = join(site.layout.logsDir, `kdgat-sandbox-run-autoencoder-${jobId}.out`);
      let log = '';
      for (let i = 0; i < 30 && !log.includes(EPILOG_END); i++) {
        await new Promise((r) => setTimeout(r, 1000));
        log = existsSync(logPath) ? readFileSync(logPath, 'utf8') : '';
      }
      expect(log).toContain('kdgat-hpc: SIGUSR1: time limit near, asking the pipeline');
      expect(log).toContain(`kdgat-hpc: checkpoint acknowledged; requeueing job ${jobId} (restart 1 of 2)`);
      expect(log).toContain('state:            REQUEUED (exit status 75)');
    } finally {
      sh('scancel', [jobId]);
    }
  });

  it("records the job as requeued when the pipeline requeues itself (Lightning's contract)", async () => {
    // The stub does what Lightning's SLURMEnvironment(auto_requeue=True) does on SIGUSR1: it runs
    // `scontrol requeue $SLURM_JOB_ID` itself; SLURM then sends SIGTERM to the job.
    const site = makeSite(sb, {
      profile: {
        ...pitzer,
        name: 'local-slurm',
        clusterName: 'local',
        account: undefined,
        accountRequired: false,
      },
    });
    const base = jobInput(site);
    const input = jobInput(site, {
      stage: {
        ...base.stage,
        id: 'lightning',
        resources: { ...base.stage.resources, cpus: 1, memGB: 1, time: '0:02:00' },
      },
      requeue: { enabled: true, signal: 'USR1', leadSeconds: 100, maxRestarts: 2, contract: 'lightning' },
    });
    const script = writeJob(sb, input);
    mkdirSync(site.layout.logsDir, { recursive: true });
    const submit = spawnSync('sbatch', ['--parsable', `--chdir=${sb.dir}`, script], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        PATH: `${sb.bin}:${process.env.PATH}`,
        STUB_LOG: sb.log,
        STUB_PYTHON_MODE: 'lightning',
        STUB_PYTHON_WAIT_STEPS: '4000',
      },
    });
    expect(submit.stderr).toBe('');
    const jobId = submit.stdout.trim().split(';')[0] ?? '';
    try {
      let restarts = 0;
      for (let i = 0; i < 120 && restarts === 0; i++) {
        await new Promise((r) => setTimeout(r, 1000));
        restarts = Number(/Restarts=(\d+)/.exec(sh('scontrol', ['show', 'job', jobId]).stdout)?.[1] ?? 0);
      }
      expect(restarts).toBe(1);
      const logPath = join(site.layout.logsDir, `kdgat-sandbox-run-lightning-${jobId}.out`);
      let log = '';
      for (let i = 0; i < 30 && !log.includes(EPILOG_END); i++) {
        await new Promise((r) => setTimeout(r, 1000));
        log = existsSync(logPath) ? readFileSync(logPath, 'utf8') : '';
      }
      expect(log).toContain('kdgat-hpc: SIGUSR1: time limit near, asking the pipeline');
      // Said by the TERM trap, or by the EXIT trap when the pipeline's exit on SLURM's TERM came first.
      expect(log).toMatch(
        new RegExp(`kdgat-hpc: (SIGTERM after )?the pipeline requeued job ${jobId} itself \\(restart 1\\)`),
      );
      expect(log).toContain('state:            REQUEUED (exit status 143)');
      // The job script did not requeue it a second time: one restart, counted by SLURM.
      expect(log).not.toContain('checkpoint acknowledged; requeueing job');
    } finally {
      sh('scancel', [jobId]);
    }
  });
});
