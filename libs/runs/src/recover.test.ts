// The recovery loop of `--wait` and `runner resume`, against a fake scheduler: a NODE_FAIL chain head
// resubmitted excluding its node, its cancelled dependent after it, both then followed to the end;
// and `resume` of a run nobody watched.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { clusterPresets } from '@kdgat/config';
import { RunRecord, type Manifest, type ManifestJob } from '@kdgat/run-record';
import type { Scheduler, SubmitRequest, TaskStatus } from '@kdgat/schedulers';
import { follow } from './follow.ts';
import { resume } from './resume.ts';

const pitzer = clusterPresets['osc-pitzer'];

function runDir(): { dir: string; record: RunRecord } {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-recover-run-'));
  const stage = (id: string, dependsOn: string[] = []) => ({
    id,
    stage: 'curriculum',
    model: 'gat',
    scale: 'small',
    dataset: 'synth',
    dependsOn,
    overrides: {},
    resources: {
      cpus: 4,
      memGB: 8,
      gpus: { count: 1 },
      nodes: 1,
      ntasksPerNode: 1,
      time: '01:00:00',
      partition: 'gpu',
      arrayConcurrency: 1,
    },
  });
  const job = (key: string, jobId: string, dependsOn: string[] = []): ManifestJob => ({
    key,
    name: `exp-${key}`,
    stageId: key,
    script: `scripts/${key}.sbatch`,
    dependsOn,
    jobId,
    runRoot: join(dir, 'outputs'),
    logs: { output: join(dir, 'logs/%x-%j.out'), error: join(dir, 'logs/%x-%j.err') },
  });
  const manifest = {
    version: 1,
    experiment: 'exp',
    createdAt: '2026-11-25T00:00:00Z',
    runDir: dir,
    jobs: [job('train', '100'), job('eval', '101', ['train'])],
    arrayIndex: {},
    resolved: {
      spec: { name: 'exp' },
      cluster: pitzer,
      partition: pitzer.partitions[0],
      stages: [stage('train'), stage('eval', ['train'])],
      requeue: { enabled: false, signal: 'USR1', leadSeconds: 300, maxRestarts: 3 },
    },
    stack: { name: 'local', source: 'test', outputs: { connection: { kind: 'local' } } },
    scheduler: 'slurm',
    submission: { status: 'submitted' },
  } as unknown as Manifest;
  return { dir, record: RunRecord.create(dir, manifest) };
}

/** Jobs 100 (NODE_FAIL on c02) and 101 (cancelled after it); what it queues completes. */
function siteScheduler(): Scheduler & { requests: SubmitRequest[] } {
  const requests: SubmitRequest[] = [];
  const known = new Map<string, TaskStatus[]>([
    ['100', [{ jobId: '100', state: 'NODE_FAIL', nodes: ['c02'] }]],
    ['101', [{ jobId: '101', state: 'CANCELLED', reason: 'DependencyNeverSatisfied' }]],
  ]);
  let next = 1240;
  return {
    kind: 'slurm',
    submitCalls: 0,
    requests,
    limits: async () => ({ maxArraySize: 1001 }),
    preflight: async () => ({ ok: true, message: '' }),
    submit: async (r) => {
      requests.push(r);
      const id = String(next++);
      known.set(id, [{ jobId: id, state: 'COMPLETED', exitCode: '0:0' }]);
      return id;
    },
    cancel: async () => {},
    query: async (ids) =>
      new Map(ids.flatMap((id) => (known.has(id) ? [[id, known.get(id)!] as const] : []))),
  };
}

function io() {
  const out = new PassThrough();
  const err = new PassThrough();
  let text = '';
  out.on('data', (d: Buffer) => (text += d.toString()));
  return { io: { out, err }, text: () => text };
}

describe('--wait with recoveries', () => {
  it('resubmits the NODE_FAIL head excluding c02 and its dependent after it, follows them, exits 0', async () => {
    const { record } = runDir();
    const scheduler = siteScheduler();
    const o = io();
    expect(await follow(record, o.io, scheduler)).toBe(0);
    expect(scheduler.requests.map((r) => [r.name, r.dependsOn, r.overrides])).toEqual([
      ['exp-train', [], ['--exclude=c02']],
      ['exp-eval', ['1240'], []],
    ]);
    expect(o.text()).toContain(
      'job train (100, NODE_FAIL on c02): resubmitted as 1240 excluding c02, from the start',
    );
    expect(o.text()).toContain('all 2 task(s) completed');
    expect(record.manifest.jobs.map((j) => [j.jobId, j.attempts?.map((a) => [a.jobId, a.cause])])).toEqual([
      ['1240', [['100', 'NODE_FAIL']]],
      ['1241', [['101', 'DEPENDENCY']]],
    ]);
  });

  it('stops a FAILED job with its triage line and exits 1', async () => {
    const { record } = runDir();
    const scheduler = siteScheduler();
    scheduler.query = async () =>
      new Map([
        ['100', [{ jobId: '100', state: 'FAILED', exitCode: '1:0' }]],
        ['101', [{ jobId: '101', state: 'CANCELLED', reason: 'DependencyNeverSatisfied' }]],
      ]);
    const o = io();
    expect(await follow(record, o.io, scheduler)).toBe(1);
    expect(scheduler.requests).toEqual([]);
    expect(o.text()).toContain('job train (100, FAILED): stopped: FAILED: exited with 1:0');
    expect(record.manifest.jobs[0]!.stopped).toMatchObject({ jobId: '100', cause: 'FAILED' });
  });

  it('exits 1 when the scheduler lost a job before its end was seen (UNKNOWN), and says so', async () => {
    const { record } = runDir();
    const scheduler = siteScheduler();
    scheduler.query = async () =>
      new Map([
        ['100', [{ jobId: '100', state: 'COMPLETED', exitCode: '0:0' }]],
        ['101', [{ jobId: '101', state: 'UNKNOWN' }]],
      ]);
    const o = io();
    expect(await follow(record, o.io, scheduler)).toBe(1);
    expect(o.text()).toContain('1 task(s) did not complete.');
    expect(o.text()).not.toContain('task(s) completed');
  });
});

describe('runner resume of a run nobody watched', () => {
  it('resubmits once and says how to follow it', async () => {
    const { record } = runDir();
    const scheduler = siteScheduler();
    const lines: string[] = [];
    expect(await resume({ record, view: record.manifest }, (l) => lines.push(l), scheduler)).toBe(0);
    expect(scheduler.requests).toHaveLength(2);
    expect(lines.at(-1)).toBe(`follow it: nx run runner:resume ${record.dir} --wait`);
    // nothing more to do the second time: both completed
    const again: string[] = [];
    expect(await resume({ record, view: record.manifest }, (l) => again.push(l), scheduler)).toBe(0);
    expect(again).toEqual(['every job of exp completed: nothing to resume']);
  });
});
