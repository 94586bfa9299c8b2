// sacct's part of the poll: recorded `sacct -n -P -o <SACCT_FIELDS>` text (SLURM 22.05, steps
// listed), the one-call property with a fake executor, and the fallback without accounting.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Executor, RunOptions, RunResult } from '@kdgat/transport';
import { describe, expect, it } from 'vitest';
import { SlurmScheduler, queryScript, splitQueryOutput } from './index.ts';
import {
  SQUEUE_FORMAT,
  expandHostlist,
  parseCpuTime,
  parseSacct,
  parseShowJob,
  parseSize,
  parseSqueue,
  parseTestOnlyStart,
} from './parse.ts';

// JobIDRaw|JobID|State|ExitCode|ElapsedRaw|TotalCPU|MaxRSS|NodeList|AllocCPUS|ReqMem
const SACCT_2205 = [
  // A 2-task srun job on two nodes: the allocation's TotalCPU is the sum of its steps.
  '501|501|COMPLETED|0:0|600|39:58.120||c[01-02]|8|16G',
  '501.batch|501.batch|COMPLETED|0:0|600|00:01.512|10240K|c01|4|',
  '501.extern|501.extern|COMPLETED|0:0|600|00:00.004|1032K|c[01-02]|8|',
  '501.0|501.0|COMPLETED|0:0|598|39:56.604|2076160K|c[01-02]|8|',
  // An array: two tasks ran (JobIDRaw is each task's own id), two still pending.
  '511|510_0|COMPLETED|0:0|305|04:50.250||c03|4|4G',
  '511.batch|510_0.batch|COMPLETED|0:0|305|04:50.250|1548288K|c03|4|',
  '511.extern|510_0.extern|COMPLETED|0:0|305|00:00:00|0|c03|4|',
  '512|510_1|TIMEOUT|0:0|3720|01:02:03.001||c04|4|4G',
  '512.batch|510_1.batch|CANCELLED|0:15|3721|01:02:03|3145728K|c04|4|',
  '512.extern|510_1.extern|COMPLETED|0:0|3720|00:00.001|1024K|c04|4|',
  '510|510_[2-3%2]|PENDING|0:0|0|00:00:00||None assigned|0|4G',
  // Over its --mem: the cgroup killed it.
  '520|520|OUT_OF_MEMORY|0:125|42|00:38.114||c05|2|2G',
  '520.batch|520.batch|OUT_OF_MEMORY|0:125|42|00:38.110|2097148K|c05|2|',
  '520.extern|520.extern|COMPLETED|0:0|42|00:00.004|1044K|c05|2|',
  // A node died under a long job.
  '530|530|NODE_FAIL|0:0|180000|5-10:00:00||c[06-07]|4|8000M',
  '530.batch|530.batch|CANCELLED|0:15|180000|5-10:00:00|7340032K|c06|2|',
  '530.extern|530.extern|CANCELLED|0:15|180000|00:00:00|1040K|c[06-07]|4|',
  // Cancelled while pending: it never ran.
  '540|540|CANCELLED by 1000|0:0|0|00:00:00||None assigned|0|4G',
  // Still running: nothing summed yet, MaxRSS empty.
  '550|550|RUNNING|0:0|125|00:00:00||c08|4|4G',
  '550.batch|550.batch|RUNNING|0:0|125|00:00:00||c08|4|',
  '550.extern|550.extern|RUNNING|0:0|125|00:00:00||c08|4|',
  '',
].join('\n');

describe('sacct output', () => {
  it('counts the memory of every task of a multi-node step (TRESUsageInTot), beside the largest task (MaxRSS)', () => {
    // Recorded on the box (jobacct_gather/linux): task 0 on c01 held ~100 MB, task 1 on c02 ~300 MB.
    const text = [
      '1|1|COMPLETED|0:0|8|00:06.454||c[01-02]|2|1600M|',
      '1.batch|1.batch|COMPLETED|0:0|8|00:00.011|10644K|c01|1||cpu=00:00:00,energy=0,fs/disk=34362,mem=10644K,pages=1,vmem=286056K',
      '1.extern|1.extern|COMPLETED|0:0|8|00:00.002|1776K|c[01-02]|2||cpu=00:00:00,energy=0,fs/disk=13952,mem=3424K,pages=0,vmem=81480K',
      '1.0|1.0|COMPLETED|0:0|7|00:06.440|320856K|c[01-02]|2||cpu=00:00:05,energy=0,fs/disk=3153710,mem=436788K,pages=2,vmem=469220K',
      '',
    ].join('\n');
    const [task] = parseSacct(text);
    expect(task!.nodes).toEqual(['c01', 'c02']);
    expect(task!.accounting).toMatchObject({ allocCpus: 2, cpuSeconds: 6.453 });
    expect(task!.accounting!.maxRssMB).toBeCloseTo(320856 / 1024, 3);
    expect(task!.accounting!.totalRssMB).toBeCloseTo(436788 / 1024, 3);
  });

  const tasks = parseSacct(SACCT_2205);
  const one = (jobId: string, arrayIndex?: number) =>
    tasks.find((t) => t.jobId === jobId && t.arrayIndex === arrayIndex)!;

  it('sums TotalCPU over the steps of a multi-node srun job, once, and takes the largest step MaxRSS', () => {
    expect(one('501')).toEqual({
      jobId: '501',
      taskJobId: '501',
      state: 'COMPLETED',
      exitCode: '0:0',
      elapsedSeconds: 600,
      nodes: ['c01', 'c02'],
      accounting: {
        cpuSeconds: 2398.12,
        maxRssMB: 2027.5,
        elapsedSeconds: 600,
        allocCpus: 8,
        reqMemMB: 16384,
        steps: ['batch', 'extern', '0'],
      },
    });
  });

  it('reads array tasks by their own ids and expands the pending remainder', () => {
    expect(one('510', 0)).toMatchObject({
      taskJobId: '511',
      state: 'COMPLETED',
      nodes: ['c03'],
      accounting: { cpuSeconds: 290.25, maxRssMB: 1512, allocCpus: 4, reqMemMB: 4096 },
    });
    expect(one('510', 1)).toMatchObject({
      taskJobId: '512',
      state: 'TIMEOUT',
      accounting: { cpuSeconds: 3723.001, maxRssMB: 3072, elapsedSeconds: 3720 },
    });
    expect(one('510', 2)).toEqual({ jobId: '510', arrayIndex: 2, state: 'PENDING' });
    expect(one('510', 3)).toEqual({ jobId: '510', arrayIndex: 3, state: 'PENDING' });
  });

  it('keeps OUT_OF_MEMORY and NODE_FAIL, and days in TotalCPU', () => {
    expect(one('520')).toMatchObject({
      state: 'OUT_OF_MEMORY',
      exitCode: '0:125',
      accounting: { maxRssMB: 2047.996 },
    });
    expect(one('530')).toMatchObject({
      state: 'NODE_FAIL',
      nodes: ['c06', 'c07'],
      accounting: { cpuSeconds: 5 * 86400 + 10 * 3600, maxRssMB: 7168, reqMemMB: 8000 },
    });
  });

  it('gives no accounting to a job that never ran or is still running', () => {
    expect(one('540')).toEqual({
      jobId: '540',
      taskJobId: '540',
      state: 'CANCELLED',
      exitCode: '0:0',
      elapsedSeconds: 0,
    });
    expect(one('550')).toEqual({
      jobId: '550',
      taskJobId: '550',
      state: 'RUNNING',
      exitCode: '0:0',
      elapsedSeconds: 125,
      nodes: ['c08'],
    });
  });

  it('reads the time and size formats', () => {
    expect(parseCpuTime('00:01.512')).toBeCloseTo(1.512);
    expect(parseCpuTime('01:02:03')).toBe(3723);
    expect(parseCpuTime('1-02:03:04')).toBe(93784);
    expect(parseCpuTime('')).toBeUndefined();
    expect(parseSize('123456K', 'K')).toEqual({ mb: 120.5625 });
    expect(parseSize('4000M', 'M')).toEqual({ mb: 4000 });
    expect(parseSize('1.50G', 'M')).toEqual({ mb: 1536 });
    expect(parseSize('0', 'K')).toEqual({ mb: 0 });
    expect(parseSize('', 'K')).toBeUndefined();
    // SLURM before 21.08 marked ReqMem per node (n) or per cpu (c).
    expect(parseSize('4000Mn', 'M')).toEqual({ mb: 4000, per: 'node' });
  });

  it('multiplies an old per-node ReqMem by the nodes', () => {
    const [t] = parseSacct(
      '600|600|COMPLETED|0:0|60|00:30.000||n[1-2]|4|4000Mn\n600.batch|600.batch|COMPLETED|0:0|60|00:30.000|1024K|n1|2|4000Mn\n',
    );
    expect(t!.accounting!.reqMemMB).toBe(8000);
  });
});

describe('nodes', () => {
  it('expands hostlists', () => {
    expect(expandHostlist('c[01-03],gpu5')).toEqual(['c01', 'c02', 'c03', 'gpu5']);
    expect(expandHostlist('n[1-2,9]')).toEqual(['n1', 'n2', 'n9']);
    expect(expandHostlist('r[1-2]-n[01-02]')).toEqual(['r1-n01', 'r1-n02', 'r2-n01', 'r2-n02']);
    expect(expandHostlist('None assigned')).toEqual([]);
    expect(expandHostlist('(null)')).toEqual([]);
  });

  it('reads them from squeue %N and scontrol NodeList', () => {
    expect(parseSqueue('70|N/A|70|RUNNING|1:00|None|c[01-02]\n71|N/A|71|PENDING|0:00|Priority|\n')).toEqual([
      { jobId: '70', state: 'RUNNING', elapsedSeconds: 60, nodes: ['c01', 'c02'] },
      { jobId: '71', state: 'PENDING', elapsedSeconds: 0, reason: 'Priority' },
    ]);
    const [t] = parseShowJob(
      'JobId=72 JobState=NODE_FAIL Reason=NodeDown ExitCode=0:0 RunTime=00:10:00 ReqNodeList=(null) NodeList=c[06-07] Restarts=0',
    );
    expect(t).toMatchObject({ state: 'NODE_FAIL', nodes: ['c06', 'c07'] });
  });
});

/** A login node that answers from recorded text and counts the calls. */
function fakeSite(opts: {
  accounting: boolean;
  sacctCode?: number;
  sacct?: string;
  squeue?: string;
  scontrol?: Record<string, string>;
}) {
  const calls: string[][] = [];
  const executor: Executor = {
    target: 'fake',
    async run(argv: readonly string[], _options: RunOptions): Promise<RunResult> {
      calls.push([...argv]);
      const ok = (stdout: string): RunResult => ({ code: 0, stdout, stderr: '', timedOut: false });
      // Another cluster's (-M NAME) answers the same.
      const [cmd, ...rest] = argv[1] === '-M' ? [argv[0], ...argv.slice(3)] : argv;
      if (cmd === 'scontrol' && rest[0] === 'show' && rest[1] === 'config')
        return ok(
          `AccountingStorageType   = ${opts.accounting ? 'accounting_storage/slurmdbd' : '(null)'}\nMaxArraySize            = 1001\n`,
        );
      if (argv[0] === 'sh' && argv[1] === '-c') {
        const script = argv[2]!;
        const ids = argv.slice(7);
        const out = [opts.squeue ?? '', `@@hpc squeue 0`];
        for (const id of ids) {
          const text = opts.scontrol?.[id];
          out.push(...(text ? [text, `@@hpc scontrol ${id} 0`] : [`@@hpc scontrol ${id} 1`]));
        }
        if (script.includes('sacct')) out.push(opts.sacct ?? '', `@@hpc sacct ${opts.sacctCode ?? 0}`);
        return ok(out.join('\n') + '\n');
      }
      return { code: 127, stdout: '', stderr: `unexpected ${argv.join(' ')}`, timedOut: false };
    },
  };
  return { executor, calls };
}

describe('one poll as one call, with sacct', () => {
  const ids = ['501', '510', '520', '550'];
  const site = () =>
    fakeSite({
      accounting: true,
      sacct: SACCT_2205,
      // squeue still lists the running job and the array's pending tasks.
      squeue:
        '550|N/A|550|RUNNING|2:05|None|c08\n510|2|510_2|PENDING|0:00|JobArrayTaskLimit|\n510|3|510_3|PENDING|0:00|JobArrayTaskLimit|',
      // scontrol remembers 520 (squeue forgot it), but not 501.
      scontrol: {
        '520':
          'JobId=520 JobState=OUT_OF_MEMORY Reason=OutOfMemory ExitCode=0:125 RunTime=00:00:42 NodeList=c05 Restarts=0',
      },
    });

  it('asks squeue, scontrol and one sacct for every job in a single remote call', async () => {
    const { executor, calls } = site();
    const slurm = new SlurmScheduler({ executor });
    const states = await slurm.query(ids);
    // The configuration once, then one call per poll.
    expect(calls.map((c) => c[0])).toEqual(['scontrol', 'sh']);
    await slurm.query(ids);
    expect(calls.map((c) => c[0])).toEqual(['scontrol', 'sh', 'sh']);
    const script = calls[1]![2]!;
    expect(script.match(/^sacct .*-n -P/gm)).toHaveLength(1);
    expect(script).toContain(
      '-o JobIDRaw,JobID,State,ExitCode,ElapsedRaw,TotalCPU,MaxRSS,NodeList,AllocCPUS,ReqMem',
    );
    expect(script).not.toMatch(/ -X/);
    expect(script).toContain('--jobs="$ids"');
    // The cluster (third): empty, the login node's own.
    expect(calls[1]!.slice(4)).toEqual(['501,510,520,550', '%F|%K|%i|%T|%M|%r|%N', '', ...ids]);

    // Forgotten by squeue and scontrol: sacct's record.
    expect(states.get('501')).toEqual([
      expect.objectContaining({ state: 'COMPLETED', nodes: ['c01', 'c02'] }),
    ]);
    expect(states.get('501')![0]!.accounting!.cpuSeconds).toBeCloseTo(2398.12);
    // Ended: sacct's word, with scontrol's restarts kept.
    expect(states.get('520')).toEqual([
      expect.objectContaining({
        state: 'OUT_OF_MEMORY',
        restarts: 0,
        reason: 'OutOfMemory',
        accounting: expect.objectContaining({ allocCpus: 2 }),
      }),
    ]);
    // Running: squeue's answer, no accounting yet.
    expect(states.get('550')).toEqual([
      { jobId: '550', state: 'RUNNING', elapsedSeconds: 125, nodes: ['c08'] },
    ]);
    const array = states.get('510')!.sort((a, b) => a.arrayIndex! - b.arrayIndex!);
    expect(array.map((t) => [t.arrayIndex, t.state, t.accounting !== undefined])).toEqual([
      [0, 'COMPLETED', true],
      [1, 'TIMEOUT', true],
      [2, 'PENDING', false],
      [3, 'PENDING', false],
    ]);
    expect(array[2]!.reason).toBe('JobArrayTaskLimit');
  });

  it('polls without sacct where the cluster keeps no accounting', async () => {
    const { executor, calls } = fakeSite({
      accounting: false,
      squeue: '550|N/A|550|RUNNING|2:05|None|c08',
      scontrol: { '520': 'JobId=520 JobState=OUT_OF_MEMORY ExitCode=0:125 RunTime=00:00:42 Restarts=0' },
    });
    const states = await new SlurmScheduler({ executor }).query(['520', '550', '501']);
    expect(calls).toHaveLength(2);
    expect(calls[1]![2]).not.toContain('sacct');
    expect(calls[1]![2]).toBe(queryScript(false));
    expect(states.get('520')).toEqual([
      {
        jobId: '520',
        taskJobId: '520',
        state: 'OUT_OF_MEMORY',
        exitCode: '0:125',
        elapsedSeconds: 42,
        restarts: 0,
      },
    ]);
    expect(states.get('501')).toBeUndefined();
  });

  it("keeps squeue's and scontrol's answer when sacct fails", async () => {
    const { executor } = fakeSite({
      accounting: true,
      sacct: 'sacct: error: Problem talking to the database: Connection refused',
      sacctCode: 1,
      scontrol: { '520': 'JobId=520 JobState=OUT_OF_MEMORY ExitCode=0:125 RunTime=00:00:42 Restarts=0' },
    });
    const states = await new SlurmScheduler({ executor }).query(['520', '501']);
    expect(states.get('520')).toEqual([
      {
        jobId: '520',
        taskJobId: '520',
        state: 'OUT_OF_MEMORY',
        exitCode: '0:125',
        elapsedSeconds: 42,
        restarts: 0,
      },
    ]);
    expect(states.has('501')).toBe(false);
  });

  it('splits the sacct section from the others', () => {
    const { sacct } = splitQueryOutput(
      '@@hpc squeue 0\n@@hpc scontrol 1 1\n550|550|RUNNING|0:0|1|00:00:00||c08|4|4G\n@@hpc sacct 0\n',
    );
    expect(sacct).toEqual({ text: '550|550|RUNNING|0:0|1|00:00:00||c08|4|4G', code: 0 });
    expect(splitQueryOutput('@@hpc squeue 0\n').sacct).toBeUndefined();
  });
});

describe('a job shorter than the sampling period', () => {
  it('has no peak (MaxRSS 0 in every step) but has its CPU time', () => {
    const [t] = parseSacct(
      '700|700|COMPLETED|0:0|3|00:00.120||c01|1|1G\n700.batch|700.batch|COMPLETED|0:0|3|00:00.120|0|c01|1|\n700.extern|700.extern|COMPLETED|0:0|3|00:00:00|0|c01|1|\n',
    );
    expect(t!.accounting).toMatchObject({ cpuSeconds: 0.12, maxRssMB: null, reqMemMB: 1024 });
  });
});

describe('another cluster of the site (-M)', () => {
  it('names the cluster in every command: config, submit, test-only on stdin, cancel, the user count and the poll', async () => {
    const { executor, calls } = fakeSite({ accounting: true });
    const inputs: (string | Buffer | undefined)[] = [];
    const recording: Executor = {
      target: 'fake',
      run: (argv, options) => {
        inputs.push(options.input);
        if (argv[0] === 'sbatch') {
          calls.push([...argv]);
          return Promise.resolve({
            code: 0,
            stdout: argv.includes('--parsable') ? '7;annex\n' : '',
            stderr:
              'sbatch: Job 9 to start at 2026-11-27T22:04:37 using 1 processors on nodes c04 in partition gpu\n',
            timedOut: false,
          });
        }
        if (argv[0] === 'scancel' || (argv[0] === 'squeue' && argv.includes('--me'))) {
          calls.push([...argv]);
          return Promise.resolve({ code: 0, stdout: '', stderr: '', timedOut: false });
        }
        return executor.run(argv, options);
      },
    };
    const slurm = new SlurmScheduler({ executor: recording, cluster: 'annex' });
    expect(slurm.target).toBe('fake -M annex');
    await slurm.limits();
    expect(calls[0]).toEqual(['scontrol', '-M', 'annex', 'show', 'config']);
    const request = { name: 'a', scriptPath: '/s/a.sh', cwd: '/s', dependsOn: [] };
    expect(await slurm.submit(request)).toBe('7');
    const probed = await slurm.probe('#!/bin/bash\n#SBATCH --partition=gpu\ntrue\n');
    expect(probed).toEqual({
      ok: true,
      message: 'Job 9 to start at 2026-11-27T22:04:37 using 1 processors on nodes c04 in partition gpu',
    });
    expect(inputs.at(-1)).toBe('#!/bin/bash\n#SBATCH --partition=gpu\ntrue\n');
    await slurm.cancel(['7']);
    await slurm.activeJobsOfUser();
    await slurm.query(['7']);
    const argvs = calls.map((c) => c.join(' '));
    expect(argvs).toEqual(
      expect.arrayContaining([
        'sbatch -M annex --parsable /s/a.sh',
        'sbatch -M annex --test-only',
        'scancel -M annex 7',
        'squeue -M annex --me -h -r -t PD,R,CF,CG,S -o %i',
      ]),
    );
    // The poll's script is handed the cluster as its third argument.
    const poll = calls.find((c) => c[0] === 'sh')!;
    expect(poll.slice(4, 7)).toEqual(['7', SQUEUE_FORMAT, 'annex']);
  });

  it("the poll's shell puts -M before squeue's, scontrol's and sacct's options only when a cluster is named", () => {
    const bin = mkdtempSync(join(tmpdir(), 'kdgat-m-'));
    for (const cmd of ['squeue', 'scontrol', 'sacct'])
      writeFileSync(join(bin, cmd), `#!/bin/sh\necho "${cmd} $*"\n`, { mode: 0o755 });
    const poll = (cluster: string) =>
      spawnSync('sh', ['-c', queryScript(true), 'sh', '7,8', '%i', cluster, '7', '8'], {
        encoding: 'utf8',
        env: { ...process.env, PATH: `${bin}:${process.env['PATH']}` },
      }).stdout;
    const named = poll('annex');
    expect(named).toMatch(/^squeue -M annex -h -r --jobs=7,8 -o %i$/m);
    expect(named).toMatch(/^scontrol -M annex show job -o 8$/m);
    expect(named).toMatch(/^sacct -M annex -n -P --jobs=7,8 -o /m);
    const own = poll('');
    expect(own).toMatch(/^squeue -h -r --jobs=7,8 -o %i$/m);
    expect(own).toMatch(/^scontrol show job -o 7$/m);
    expect(own).not.toContain('-M');
  });
});

describe('sbatch --test-only: the start it forecasts', () => {
  it('reads the time, nodes and partition as printed, and nothing from a refusal', () => {
    expect(
      parseTestOnlyStart(
        'Job 9 to start at 2026-11-27T22:41:05 using 2 processors on nodes c[01-02] in partition gpu',
      ),
    ).toEqual({ start: '2026-11-27T22:41:05', nodes: 'c[01-02]', partition: 'gpu' });
    expect(
      parseTestOnlyStart('allocation failure: Requested node configuration is not available'),
    ).toBeUndefined();
  });
});
