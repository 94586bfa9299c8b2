// bench/ssh-submit: the time to submit the eight examples (shrunk as the examples suite shrinks them)
// to a SLURM site over SSH from a laptop, against the same eight submitted to the local SLURM on this
// machine, measured in one run. Each variant is one `kdgat-runner train|tune` process per example,
// as a user types it (stack outputs, checks, plan, render, code snapshot and run dir put on the site
// for SSH, preflight, submit); no --wait. Every sbatch holds its job (SBATCH_HOLD, set in the
// runner's environment here and in the login sessions' on the site), so jobs stay queued and the
// machine stays quiet; each round's jobs are cancelled afterwards (not timed).
// Variants interleave (A B, then B A, …), each repeated --reps times; prints median, min and max.
//
//   sudo node bench/ssh-submit/run.ts [--reps 5]      (root: the site needs namespaces)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { parseYaml } from '@kdgat/config';
import { startSite, type SshSite } from '../../apps/runner/test/site/site.ts';
import { shrinkForTest, type Json } from '../../scripts/e2e-examples/shrink.ts';

const REPO = resolve(import.meta.dirname, '../..');
const RUNNER = join(REPO, 'apps/runner/bin/kdgat-runner.js');
const { values } = parseArgs({ options: { reps: { type: 'string', default: '5' } } });
const reps = Number(values.reps);
if (!Number.isInteger(reps) || reps < 1)
  throw new Error(`--reps ${values.reps}: expected a whole number >= 1`);

type Obj = { [k: string]: Json };
const examples = readdirSync(join(REPO, 'examples'))
  .filter((f) => /\.ya?ml$/.test(f))
  .sort()
  .map((f) => ({
    file: f,
    spec: parseYaml(readFileSync(join(REPO, 'examples', f), 'utf8'), f).value as Obj,
  }));
const MAKER = 'kdgat-hcrl-sa'; // examples/kdgat-pitzer.yaml: the run the others read (`inputs: - run: kdgat-hcrl-sa`)
const renames = new Map([[MAKER, `${MAKER}-bench`]]);
const dir = mkdtempSync(join(tmpdir(), 'kdgat-bench-ssh-'));
const localEnv = { ...process.env, KD_GAT_DATA_ROOT: join(REPO, '.hpc/data/raw') };
const heldEnv = { ...localEnv, SBATCH_HOLD: '1' };

function must(
  what: string,
  r: { status: number | null; stdout?: string | Buffer; stderr?: string | Buffer },
): void {
  if (r.status !== 0) throw new Error(`${what} failed:\n${String(r.stdout ?? '')}${String(r.stderr ?? '')}`);
}
const localRunner = (args: string[], env = localEnv) =>
  spawnSync(process.execPath, [RUNNER, ...args], { cwd: REPO, env, encoding: 'utf8' });
const slurmLocal = (arg: string) =>
  spawnSync('bash', [join(REPO, 'scripts/slurm-local.sh'), arg], { stdio: 'inherit' }).status ?? 1;

/** One example's spec file for a round (`tag`), and its command. */
function specFor(e: (typeof examples)[number], tag: string): { file: string; command: string } {
  const file = join(dir, `${tag}-${e.file}`);
  writeFileSync(file, `${JSON.stringify(shrinkForTest(e.spec, tag, renames), null, 2)}\n`);
  return { file, command: e.spec['tune'] ? 'tune' : 'train' };
}

const startedSlurm = slurmLocal('status') !== 0;
if (startedSlurm) must('scripts/slurm-local.sh up', { status: slurmLocal('up') });
let site: SshSite | undefined;
try {
  console.log('bench ssh-submit: setting up the local stack and the site over SSH …');
  must(
    'infra:up --stack local',
    spawnSync(
      'bash',
      [join(REPO, 'scripts/with-toolchain.sh'), 'nx', 'run', 'infra:up', '--stack', 'local'],
      {
        cwd: REPO,
        encoding: 'utf8',
      },
    ),
  );
  site = await startSite();
  const up = await site.pulumi('up', ['--summary']);
  if (up.code !== 0) throw new Error(`infra:up of the site failed:\n${up.out}${up.err}`);
  // The run the other examples read, finished once on each cluster.
  const maker = examples.find((e) => e.spec['name'] === MAKER)!;
  const makerSpec = specFor(maker, 'bench');
  must(
    'kdgat-pitzer.yaml on the local SLURM',
    localRunner([
      'train',
      '--spec',
      makerSpec.file,
      '--stack',
      'local',
      '--scheduler',
      'slurm',
      '--wait',
      '--force',
    ]),
  );
  const onSite = await site.runner([
    'train',
    '--spec',
    makerSpec.file,
    '--stack',
    site.stack,
    '--scheduler',
    'slurm',
    '--wait',
    '--force',
  ]);
  if (onSite.code !== 0) throw new Error(`kdgat-pitzer.yaml on the site failed:\n${onSite.out}${onSite.err}`);
  // Held from here on: the site's login sessions get SBATCH_HOLD too (sshd re-reads its config).
  const sshdConfig = join(site.siteRoot, 'ssh', 'sshd_config');
  writeFileSync(
    sshdConfig,
    readFileSync(sshdConfig, 'utf8').replace(/^SetEnv (.*)$/m, 'SetEnv $1 SBATCH_HOLD=1'),
  );
  process.kill(Number(readFileSync(join(site.siteRoot, 'ssh', 'sshd.pid'), 'utf8').trim()), 'SIGHUP');

  const variants = {
    local: async (tag: string) => {
      for (const e of examples) {
        const s = specFor(e, tag);
        must(
          `${s.command} ${e.file} (local)`,
          localRunner(
            [s.command, '--spec', s.file, '--stack', 'local', '--scheduler', 'slurm', '--force'],
            heldEnv,
          ),
        );
      }
    },
    ssh: async (tag: string) => {
      for (const e of examples) {
        const s = specFor(e, tag);
        const r = await site!.runner([
          s.command,
          '--spec',
          s.file,
          '--stack',
          site!.stack,
          '--scheduler',
          'slurm',
          '--force',
        ]);
        if (r.code !== 0) throw new Error(`${s.command} ${e.file} over SSH failed:\n${r.out}${r.err}`);
      }
    },
  };
  const cancelAll = async () => {
    spawnSync('scancel', ['--user=root', '--quiet']);
    await site!.ssh('scancel --user=root --quiet');
  };
  const seconds: Record<keyof typeof variants, number[]> = { local: [], ssh: [] };
  for (let rep = 0; rep < reps; rep++) {
    const order: (keyof typeof variants)[] = rep % 2 === 0 ? ['local', 'ssh'] : ['ssh', 'local'];
    for (const v of order) {
      const t0 = performance.now();
      await variants[v](`b${rep}${v}`);
      seconds[v].push((performance.now() - t0) / 1000);
      await cancelAll();
    }
    console.log(
      `  round ${rep + 1}/${reps}: local ${seconds.local.at(-1)!.toFixed(1)} s, ssh ${seconds.ssh.at(-1)!.toFixed(1)} s`,
    );
  }
  const stats = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const mid = s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    return { median: mid, min: s[0]!, max: s.at(-1)! };
  };
  console.log('');
  console.log(
    `submitting the ${examples.length} examples (${reps} rounds, interleaved), wall seconds for all ${examples.length}:`,
  );
  console.log('  variant                          median      min      max');
  for (const [v, label] of [
    ['local', 'local SLURM, this machine'],
    ['ssh', 'site over SSH (from the laptop)'],
  ] as const) {
    const s = stats(seconds[v]);
    console.log(
      `  ${label.padEnd(32)} ${s.median.toFixed(1).padStart(6)} ${s.min.toFixed(1).padStart(8)} ${s.max.toFixed(1).padStart(8)}`,
    );
  }
  console.log(
    `  ratio ssh / local (medians): ${(stats(seconds.ssh).median / stats(seconds.local).median).toFixed(2)}`,
  );
} finally {
  site?.stop();
  if (startedSlurm) slurmLocal('down');
}
