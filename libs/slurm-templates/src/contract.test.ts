import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RUN_CONTRACT_FILE } from '@kdgat/config';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { jobInput, makeSite, writeJob, type SandboxSite } from './test-support/job-harness.ts';
import { makeSandbox, runBash, runBashSignalled, type Sandbox } from './test-support/sandbox.ts';

// The job script keeps the run contract the pipeline keeps (python/src/kdgat/contract/run_contract.json,
// read here as plain JSON): a pipeline that answers the signal named by the file's variable with the
// file's acknowledgement in the file's run-dir layout and the file's exit status gets requeued.
const file = JSON.parse(readFileSync(RUN_CONTRACT_FILE, 'utf8')) as {
  requeue: { exitStatus: number; signalEnv: string; ackFile: string };
  runDir: { layout: string };
  shards: { indexEnv: string; countEnv: string };
};

let sb: Sandbox;
let site: SandboxSite;
beforeEach(() => {
  sb = makeSandbox();
  site = makeSite(sb);
});
afterEach(() => sb.cleanup());

it("requeues a pipeline that acknowledges and exits as the run contract says, and ends with the contract's status", async () => {
  const input = jobInput(site);
  const runDir = file.runDir.layout
    .replace('<run-root>', input.runRoot)
    .replace('<dataset>', input.stage.dataset)
    .replace('<model>', input.stage.model)
    .replace('<scale>', input.stage.scale)
    .replace('<stage>', input.stage.stage);
  const { exitStatus, signalEnv, ackFile } = file.requeue;
  sb.write(
    'bin/python',
    [
      '#!/bin/bash',
      `trap 'mkdir -p "${runDir}" && printf "{}\\n" >"${join(runDir, ackFile)}"; exit ${exitStatus}' "\${${signalEnv}:?the job script exports no ${signalEnv}}"`,
      'touch "$STUB_LOG/python.started"',
      'for ((t = 0; t < 300; t++)); do sleep 0.05; done',
      'exit 9',
      '',
    ].join('\n'),
    0o755,
  );
  const r = await runBashSignalled(writeJob(sb, input), {
    cwd: sb.dir,
    env: sb.env({ SLURM_JOB_ID: '777', SLURM_RESTART_COUNT: '0' }),
    readyFile: join(sb.log, 'python.started'),
    signal: 'SIGUSR1',
  });
  expect(r.stdout).toContain('checkpoint acknowledged; requeueing job 777');
  expect(sb.calls('scontrol')).toEqual([['requeue', '777']]);
  expect(r.status).toBe(exitStatus);
});

it("gives a shard task the contract's index and count variables, and the join the count alone", () => {
  const { indexEnv, countEnv } = file.shards;
  sb.write(
    'bin/python',
    [
      '#!/bin/bash',
      // The stage's own command only (the epilog runs python too).
      `[[ $3 != preprocess ]] || printf '%s|%s\\n' "\${${indexEnv}-none}" "\${${countEnv}-none}" >>"$STUB_LOG/shard.seen"`,
      '',
    ].join('\n'),
    0o755,
  );
  const base = jobInput(site);
  const stage = { ...base.stage, id: 'preprocess', stage: 'preprocess' };
  const layout = { ...site.layout, cacheDirs: { hcrl_sa: join(site.layout.root, 'cache', 'hcrl_sa') } };
  for (const [task, env] of [
    [true, { SLURM_ARRAY_TASK_ID: '4' }],
    [false, {}],
  ] as const) {
    const r = runBash(writeJob(sb, jobInput(site, { stage, layout, shards: { count: 5, task } })), [], {
      cwd: sb.dir,
      env: sb.env(env),
    });
    expect(r.status, r.stderr).toBe(0);
  }
  expect(readFileSync(join(sb.log, 'shard.seen'), 'utf8')).toBe('4|5\nnone|5\n');
});
