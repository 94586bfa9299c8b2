import { describe, expect, it } from 'vitest';
import { isActive, isFailure } from '../core.ts';
import { sbatchArgs, splitQueryOutput } from './index.ts';
import {
  expandIndexRange,
  parseElapsed,
  parseParsableJobId,
  parseSacct,
  parseShowConfig,
  parseShowJob,
  parseSqueue,
} from './parse.ts';

describe('sbatch arguments', () => {
  const request = {
    name: 'sw-train',
    scriptPath: '/r/scripts/train.sbatch',
    cwd: '/r',
    dependsOn: ['11', '12'],
    array: { size: 3, concurrency: 2 },
  };

  it("submits afterok chains; the array is the script's own #SBATCH line", () => {
    expect(sbatchArgs(request, 'submit')).toEqual([
      '--parsable',
      '--dependency=afterok:11:12',
      '--kill-on-invalid-dep=yes',
      '/r/scripts/train.sbatch',
    ]);
  });

  it('waits task by task (aftercorr) on arrays over the same points, and on whole jobs (afterok) otherwise', () => {
    expect(sbatchArgs({ ...request, dependsOn: ['11'], aftercorr: ['12', '13'] }, 'submit')).toContain(
      '--dependency=afterok:11,aftercorr:12:13',
    );
    expect(sbatchArgs({ ...request, dependsOn: [], aftercorr: ['12'] }, 'submit')).toContain(
      '--dependency=aftercorr:12',
    );
  });

  it("holds a throttled sweep's later chunk until the chunk before it ended, whatever its outcome (afterany)", () => {
    expect(
      sbatchArgs({ ...request, dependsOn: [], aftercorr: ['12'], afterany: ['14'] }, 'submit'),
    ).toContain('--dependency=aftercorr:12,afterany:14');
  });

  it('preflights the script without the chain (its jobs do not exist yet)', () => {
    expect(sbatchArgs(request, 'test')).toEqual(['--test-only', '/r/scripts/train.sbatch']);
  });
});

describe('parsers', () => {
  it('reads the job id from --parsable output, with or without a cluster', () => {
    expect(parseParsableJobId('42\n')).toBe('42');
    expect(parseParsableJobId('42;pitzer\n')).toBe('42');
    expect(() => parseParsableJobId('Submitted batch job 42')).toThrow(/expected a numeric job id/);
  });

  it('reads MaxArraySize and AccountingStorageType from scontrol show config', () => {
    const cfg = parseShowConfig(
      'Configuration data as of 2026-11-22T10:00:00\nAccountingStorageType   = (null)\nMaxArraySize            = 1001\n',
    );
    expect(cfg.get('MaxArraySize')).toBe('1001');
    expect(cfg.get('AccountingStorageType')).toBe('(null)');
  });

  it('parses SLURM durations', () => {
    expect(parseElapsed('0:05')).toBe(5);
    expect(parseElapsed('1:02:03')).toBe(3723);
    expect(parseElapsed('2-01:00:00')).toBe(176400);
    expect(parseElapsed('30')).toBe(1800);
    expect(parseElapsed('UNLIMITED')).toBeUndefined();
  });

  it('reads squeue -r lines per task', () => {
    const tasks = parseSqueue(
      '12|0|12_0|RUNNING|0:07|None\n12|2|12_2|PENDING|0:00|JobArrayTaskLimit\n15|N/A|15|PENDING|0:00|Dependency\n',
    );
    expect(tasks).toEqual([
      { jobId: '12', arrayIndex: 0, state: 'RUNNING', elapsedSeconds: 7 },
      { jobId: '12', arrayIndex: 2, state: 'PENDING', elapsedSeconds: 0, reason: 'JobArrayTaskLimit' },
      { jobId: '15', state: 'PENDING', elapsedSeconds: 0, reason: 'Dependency' },
    ]);
  });

  it('keeps a job stopped with SIGSTOP (scancel --signal=STOP) as STOPPED, still holding its allocation', () => {
    const [task] = parseSqueue('16|N/A|16|STOPPED|0:13|None\n');
    expect(task).toMatchObject({ jobId: '16', state: 'STOPPED', elapsedSeconds: 13 });
    expect(isActive(task!.state)).toBe(true);
    expect(isFailure(task!.state)).toBe(false);
  });

  it('reads scontrol show job -o records, expanding a pending array remainder', () => {
    const text = [
      'JobId=13 ArrayJobId=12 ArrayTaskId=1 JobName=sw-train UserId=root(0) JobState=COMPLETED Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 ExitCode=0:0 RunTime=00:00:04 TimeLimit=00:10:00',
      'JobId=12 ArrayJobId=12 ArrayTaskId=2-3%1 JobName=sw-train JobState=PENDING Reason=JobArrayTaskLimit Restarts=0 ExitCode=0:0 RunTime=00:00:00',
      'JobId=20 JobName=x-cur JobState=PENDING Reason=BeginTime Restarts=1 ExitCode=0:0 RunTime=00:00:00',
    ].join('\n');
    expect(parseShowJob(text)).toEqual([
      {
        jobId: '12',
        taskJobId: '13',
        arrayIndex: 1,
        state: 'COMPLETED',
        exitCode: '0:0',
        elapsedSeconds: 4,
        restarts: 0,
      },
      { jobId: '12', arrayIndex: 2, state: 'PENDING' },
      { jobId: '12', arrayIndex: 3, state: 'PENDING' },
      {
        jobId: '20',
        taskJobId: '20',
        state: 'PENDING',
        exitCode: '0:0',
        elapsedSeconds: 0,
        reason: 'BeginTime',
        restarts: 1,
      },
    ]);
  });

  it('reads sacct -P -X lines', () => {
    expect(parseSacct('31|30_1|TIMEOUT|0:0|605\n40|40|CANCELLED by 0|0:0|0\n')).toEqual([
      { jobId: '30', taskJobId: '31', arrayIndex: 1, state: 'TIMEOUT', exitCode: '0:0', elapsedSeconds: 605 },
      { jobId: '40', taskJobId: '40', state: 'CANCELLED', exitCode: '0:0', elapsedSeconds: 0 },
    ]);
  });

  it('expands array index ranges', () => {
    expect(expandIndexRange('0-4:2,7%3')).toEqual([0, 2, 4, 7]);
  });
});

describe('one poll as one call', () => {
  it("splits squeue and each job's scontrol section, with their statuses", () => {
    const out = [
      '101|N/A|101|RUNNING|0:05|None',
      '@@hpc squeue 0',
      'JobId=101 JobName=a JobState=RUNNING Restarts=0 ExitCode=0:0',
      '@@hpc scontrol 101 0',
      '@@hpc scontrol 102 1',
      '',
    ].join('\n');
    const { squeue, scontrol } = splitQueryOutput(out);
    expect(squeue).toEqual({ text: '101|N/A|101|RUNNING|0:05|None', code: 0 });
    expect(scontrol.get('101')).toEqual({
      text: 'JobId=101 JobName=a JobState=RUNNING Restarts=0 ExitCode=0:0',
      code: 0,
    });
    expect(scontrol.get('102')).toEqual({ text: '', code: 1 });
  });
});
