import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { condaEnv, pitzer, pitzerJob, stage } from './fixtures.test-support.ts';
import { renderTrainGpu } from './site/render-site-scripts.ts';
import { NO_SLURM_HERE, runsHere } from './test-support/skips.ts';
import { renderTrainJob } from './train-job/render-train-job.ts';

// Real sbatch checks the rendered #SBATCH lines (`--test-only`: validated, never queued) against the
// local SLURM of docs/CONTRACTS.md (partition gpu, Gres=gpu:v100:1). Runs only where a controller
// answers `scontrol ping` (SLURM_CONF honoured): scripts/slurm-local.sh up, or a real cluster.
const slurmUp =
  spawnSync('scontrol', ['ping'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).stdout?.includes(
    'is UP',
  ) ?? false;
const dir = mkdtempSync(join(tmpdir(), 'kdgat-sbatch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const profile = {
  ...pitzer,
  name: 'local-slurm',
  clusterName: 'local',
  account: undefined,
  accountRequired: false,
};
const resources = {
  cpus: 1,
  memGB: 1,
  gpus: { count: 1, type: 'v100' },
  nodes: 1,
  ntasksPerNode: 1,
  time: '0:10:00',
  partition: 'gpu',
  arrayConcurrency: 2,
};
const layout = {
  root: dir,
  cacheDirs: { hcrl_sa: `${dir}/cache/hcrl_sa` },
  runsDir: `${dir}/runs`,
  logsDir: `${dir}/logs`,
};
const base = {
  profile,
  layout,
  stage: stage({ id: 'autoencoder', stage: 'autoencoder', model: 'vgae', resources }),
};

function testOnly(name: string, text: string): { status: number | null; out: string } {
  const path = join(dir, name);
  writeFileSync(path, text);
  const r = spawnSync('sbatch', ['--test-only', path], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

const sbatchHere = runsHere(slurmUp, 'sbatch --test-only of the rendered directives', NO_SLURM_HERE);

describe.runIf(sbatchHere)('sbatch --test-only accepts the rendered directives', () => {
  const cases: [string, string][] = [
    ['single.sh', renderTrainJob(pitzerJob(base)).script],
    [
      'array.sh',
      renderTrainJob(
        pitzerJob({ ...base, sweepPoints: [{ 'training.lr': 1 }, { 'training.lr': 2 }, { 'training.lr': 3 }], arrayTablePath: `${dir}/t.tsv` }),
      ).script,
    ],
    [
      'gpus-per-node.sh',
      renderTrainJob(pitzerJob({ ...base, profile: { ...profile, gpuDirective: 'gpus-per-node' } })).script,
    ],
    [
      'no-requeue.sh',
      renderTrainJob(
        pitzerJob({ ...base, requeue: { enabled: false, signal: 'USR1', leadSeconds: 60, maxRestarts: 0 } }),
      ).script,
    ],
    [
      'train_gpu.sh',
      renderTrainGpu(
        {
          ...profile,
          defaultPartition: 'gpu',
          partitions: [
            {
              name: 'gpu',
              gpuType: 'v100',
              gpusPerNode: 1,
              coresPerNode: 2,
              memPerNodeGB: 2,
              maxWalltime: '1-00:00:00',
            },
          ],
        },
        condaEnv,
        layout,
      ),
    ],
  ];
  for (const [name, text] of cases) {
    it(name, () => {
      const r = testOnly(name, text);
      expect(r.out).toMatch(/sbatch: Job \d+ to start at/);
      expect(r.status).toBe(0);
    });
  }
});
