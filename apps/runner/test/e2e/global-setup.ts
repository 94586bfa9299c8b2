// Starts the repo's one-node SLURM for the e2e tests if it is not up, and stops it afterwards
// only if this run started it.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';

const REPO = resolve(import.meta.dirname, '../../../..');
const SCRIPT = join(REPO, 'scripts', 'slurm-local.sh');
let startedHere = false;

function run(arg: string): { code: number; out: string } {
  const r = spawnSync('bash', [SCRIPT, arg], { encoding: 'utf8', timeout: 170_000 });
  return { code: r.status ?? 1, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

export function setup(): void {
  // Developer convenience for running only the local-scheduler file: HPC_E2E_NO_SLURM=1.
  if (process.env['HPC_E2E_NO_SLURM'] === '1') return;
  if (!existsSync(SCRIPT))
    throw new Error(`${SCRIPT} is missing: the e2e tests need the local SLURM cluster`);
  if (run('status').code === 0) return;
  const up = run('up');
  if (up.code !== 0) throw new Error(`scripts/slurm-local.sh up failed:\n${up.out}`);
  startedHere = true;
}

export function teardown(): void {
  if (startedHere) run('down');
}
