import { describe, expect, it } from 'vitest';
import type { TaskStatus } from '@kdgat/schedulers';
import { triageTask } from './triage.ts';

const task = (state: TaskStatus['state'], extra: Partial<TaskStatus> = {}): TaskStatus => ({
  jobId: '7',
  state,
  ...extra,
});
const ctx = { timeLimit: '01:00:00', memGB: 85, dataset: 'hcrl_sa', maxRestarts: 3 };

describe('triageTask', () => {
  it('says nothing about a clean completion', () => {
    expect(triageTask(task('COMPLETED', { exitCode: '0:0' }), 'epoch 3 done\n', ctx)).toBeNull();
  });

  it('TIMEOUT: raise the time limit or enable requeue', () => {
    const t = triageTask(
      task('TIMEOUT'),
      'slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2026-11-22T10:00:00 DUE TO TIME LIMIT ***',
      ctx,
    )!;
    expect(t.kind).toBe('TIMEOUT');
    expect(t.fix).toMatch(/raise resources\.time \(now 01:00:00\)/);
  });

  it('OUT_OF_MEMORY from the state or from the kernel message', () => {
    expect(triageTask(task('OUT_OF_MEMORY'), '', ctx)!.fix).toMatch(/raise resources\.memGB \(now 85G\)/);
    const fromLog = triageTask(
      task('FAILED', { exitCode: '0:9' }),
      'slurmstepd: error: Detected 1 oom_kill event in StepId=7.batch. Some of the step tasks have been OOM Killed.',
      ctx,
    )!;
    expect(fromLog.kind).toBe('OUT_OF_MEMORY');
  });

  it('CUDA OOM: lower the batch size or use the trial', () => {
    const t = triageTask(
      task('FAILED', { exitCode: '1:0' }),
      'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB',
      ctx,
    )!;
    expect(t.kind).toBe('CUDA_OOM');
    expect(t.fix).toMatch(/batch size/);
  });

  it('NODE_FAIL: resubmit', () => {
    expect(triageTask(task('NODE_FAIL'), '', ctx)!.fix).toMatch(/resubmit/);
  });

  it('preempted and requeued: says how often and that it resumed', () => {
    const t = triageTask(
      task('COMPLETED', { restarts: 2, exitCode: '0:0' }),
      'kdgat-hpc: checkpoint acknowledged; requeueing job 7',
      ctx,
    )!;
    expect(t.kind).toBe('PREEMPTED_REQUEUED');
    expect(t.what).toMatch(/requeued 2 time\(s\); resumed from checkpoints\/last\.ckpt/);
  });

  it('missing staged data: build the cache for the dataset', () => {
    const t = triageTask(
      task('FAILED', { exitCode: '66:0' }),
      'kdgat-hpc: staging failed: cache /fs/scratch/x/cache/hcrl_sa does not exist',
      ctx,
    )!;
    expect(t.kind).toBe('MISSING_STAGED_DATA');
    expect(t.fix).toMatch(/preprocess stage for hcrl_sa/);
  });

  it("missing staged data: stage_data.sh's own message", () => {
    const tail =
      "kdgat-hpc stage: ERROR: dataset hcrl_sa: source directory '/fs/scratch/p/kd-gat/cache/hcrl_sa' does not exist (was the cache built? run the preprocess stage)";
    expect(triageTask(task('FAILED', { exitCode: '1:0' }), tail, ctx)!.kind).toBe('MISSING_STAGED_DATA');
  });

  it('a job whose afterok dependency failed', () => {
    expect(triageTask(task('CANCELLED', { reason: 'DependencyNeverSatisfied' }), '', ctx)!.kind).toBe(
      'DEPENDENCY',
    );
  });

  it('otherwise quotes the last error line of the log', () => {
    const t = triageTask(
      task('FAILED', { exitCode: '1:0' }),
      'Traceback (most recent call last):\nValueError: bad lr',
      ctx,
    )!;
    expect(t.kind).toBe('FAILED');
    expect(t.what).toMatch(/exited with 1:0: ValueError: bad lr/);
  });

  it("FAILED: the log's last error line is shown with its control characters as text", () => {
    const t = triageTask(
      task('FAILED', { exitCode: '1:0' }),
      'epoch 2\nRuntimeError: boom\x1b]0;owned\x07\x1b[2J\n',
      ctx,
    )!;
    expect(t.kind).toBe('FAILED');
    expect(t.what).toBe('exited with 1:0: RuntimeError: boom\\x1b]0;owned\\x07\\x1b[2J');
  });
});
