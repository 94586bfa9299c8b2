// Failure triage: from a task's final state, restart count and log tail, say what went wrong
// in the user's words and the fix to try. Pure; tested against recorded log tails.
import type { TaskStatus } from '@kdgat/schedulers';
import { printable } from './printable.ts';

export type TriageKind =
  | 'TIMEOUT'
  | 'OUT_OF_MEMORY'
  | 'CUDA_OOM'
  | 'NODE_FAIL'
  | 'PREEMPTED_REQUEUED'
  | 'MISSING_STAGED_DATA'
  | 'DEPENDENCY'
  | 'CANCELLED'
  | 'FAILED';

export interface Triage {
  kind: TriageKind;
  /** What happened, one line. */
  what: string;
  /** The fix to try, one line. */
  fix: string;
}

const CUDA_OOM =
  /CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation/i;
const HOST_OOM = /oom[-_ ]kill|Out Of Memory|Exceeded job memory limit|MemoryError|Killed process \d+/i;
const TIME_LIMIT = /DUE TO TIME LIMIT|time limit exceeded/i;
const NODE = /NODE[_ ]FAIL|node failure|Socket timed out on send\/recv/i;
// `kdgat-hpc stage: ERROR: dataset …` is what @kdgat/slurm-templates' stage_data.sh prints.
const STAGING =
  /kdgat-hpc stage: ERROR|stag(e|ing)[^\n]*(fail|missing|not found|verif|mismatch)|missing staged|cache[^\n]*(does not exist|not found|missing|is empty)|No such file or directory[^\n]*cache|FileNotFoundError[^\n]*(cache|graphs?|processed)|CACHE_ROOT[^\n]*(not|missing|unset)/i;
const REQUEUE = /requeue/i;

/** Returns null for a task that completed cleanly without restarts. */
export function triageTask(
  task: TaskStatus,
  logTail: string,
  context: { timeLimit?: string; memGB?: number; maxRestarts?: number; dataset?: string } = {},
): Triage | null {
  const restarts = task.restarts ?? 0;
  const state = task.state;
  const limit = context.timeLimit ? ` (now ${context.timeLimit})` : '';
  const mem = context.memGB !== undefined ? ` (now ${context.memGB}G)` : '';
  const dataset = context.dataset ?? '<dataset>';

  if (state === 'COMPLETED' || state === 'RUNNING' || state === 'PENDING') {
    if (
      restarts > 0 ||
      (state === 'COMPLETED' && /requeue_ack|requeued/i.test(logTail) && REQUEUE.test(logTail))
    ) {
      return {
        kind: 'PREEMPTED_REQUEUED',
        what: `preempted or near its time limit, checkpointed and requeued${restarts ? ` ${restarts} time(s)` : ''}; resumed from checkpoints/last.ckpt`,
        fix:
          state === 'COMPLETED'
            ? 'nothing to fix; raise resources.time if requeues cost too much'
            : `nothing yet; if it keeps requeueing, raise resources.time${limit} or requeue.maxRestarts${context.maxRestarts !== undefined ? ` (now ${context.maxRestarts})` : ''}`,
      };
    }
    return null;
  }
  if (CUDA_OOM.test(logTail)) {
    return {
      kind: 'CUDA_OOM',
      what: 'the GPU ran out of memory (CUDA out of memory)',
      fix: 'lower the batch size (-O training.batch_size …) or let the trial find it (batch_size_mode: trial, examples/trial-batch.yaml); keep precision 16-mixed',
    };
  }
  if (state === 'OUT_OF_MEMORY' || HOST_OOM.test(logTail)) {
    return {
      kind: 'OUT_OF_MEMORY',
      what: 'the job exceeded its host memory request and was killed',
      fix: `raise resources.memGB${mem}, or lower data-loader workers / the in-memory dataset size`,
    };
  }
  if (state === 'TIMEOUT' || TIME_LIMIT.test(logTail)) {
    return {
      kind: 'TIMEOUT',
      what: `the job reached its time limit${limit}${restarts ? ` after ${restarts} requeue(s)` : ''}`,
      fix: `raise resources.time${limit} within the partition's maximum, or enable requeue (requeue.enabled: true) so it checkpoints and continues`,
    };
  }
  if (state === 'NODE_FAIL' || state === 'BOOT_FAIL' || NODE.test(logTail)) {
    return {
      kind: 'NODE_FAIL',
      what: `the node failed under the job${task.reason ? ` (${task.reason})` : ''}`,
      fix: 'resubmit (train --force); with requeue enabled SLURM requeues it and it resumes from its checkpoint',
    };
  }
  if (state === 'PREEMPTED') {
    return {
      kind: 'PREEMPTED_REQUEUED',
      what: 'preempted and not requeued',
      fix: 'enable requeue (requeue.enabled: true) or use a partition without preemption',
    };
  }
  if (STAGING.test(logTail)) {
    return {
      kind: 'MISSING_STAGED_DATA',
      what: `the staged data for ${dataset} was missing or failed verification`,
      fix: `build the cache first (the pipeline's preprocess stage for ${dataset}, into the stack's scratch cacheDirs) and check staging.datasets; \`pulumi up\` creates the cache layout`,
    };
  }
  if (state === 'CANCELLED' && /Dependency/i.test(task.reason ?? '')) {
    return {
      kind: 'DEPENDENCY',
      what: 'not run: a job it depends on (afterok) did not complete',
      fix: 'fix the earlier stage, then train again',
    };
  }
  if (state === 'CANCELLED') {
    return {
      kind: 'CANCELLED',
      what: `cancelled${task.reason ? ` (${task.reason})` : ''}`,
      fix: 'train again when wanted',
    };
  }
  const lastError = logTail
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => /error|exception|traceback|fatal/i.test(l))
    .pop();
  return {
    kind: 'FAILED',
    // The log's line is printed by status and --wait: its control characters shown, not obeyed.
    what: `exited with ${task.exitCode ?? 'a non-zero status'}${lastError ? `: ${printable(lastError.slice(0, 200))}` : ''}`,
    fix: 'read the log (kdgat-runner logs <run>) for the traceback',
  };
}
