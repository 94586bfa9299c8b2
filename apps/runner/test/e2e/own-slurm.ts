// A private SLURM instance for a test that needs another configuration (e.g. a low MaxArraySize):
// its own state dir and ports through scripts/slurm-local.sh's knobs, so the shared cluster the
// other suites use is never reconfigured. Started and stopped by the test itself.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { REPO } from './harness.ts';

export interface OwnSlurm {
  conf: string;
  env: NodeJS.ProcessEnv;
  stop(): void;
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.on('error', rej);
    srv.listen(0, '0.0.0.0', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? res(addr.port) : rej(new Error('no port'))));
    });
  });
}

export async function startOwnSlurm(knobs: { maxArraySize: number }): Promise<OwnSlurm> {
  const dir = mkdtempSync('/var/tmp/kdgat-slurm-test-');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HPC_SLURM_DIR: dir,
    HPC_SLURMCTLD_PORT: String(await freePort()),
    HPC_SLURMD_PORT: String(await freePort()),
    HPC_SLURM_MAX_ARRAY_SIZE: String(knobs.maxArraySize),
    SLURM_CONF: join(dir, 'slurm.conf'),
  };
  const script = join(REPO, 'scripts', 'slurm-local.sh');
  const stop = () => {
    spawnSync('bash', [script, 'down'], { env, encoding: 'utf8', timeout: 60_000 });
    rmSync(dir, { recursive: true, force: true });
  };
  const up = spawnSync('bash', [script, 'up'], { env, encoding: 'utf8', timeout: 170_000 });
  if (up.status !== 0) {
    const why = `${up.stdout ?? ''}${up.stderr ?? ''}`;
    stop();
    throw new Error(`could not start a private SLURM in ${dir}:\n${why}`);
  }
  return { conf: env['SLURM_CONF']!, env, stop };
}
