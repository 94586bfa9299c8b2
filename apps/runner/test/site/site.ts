// The "site over SSH" of the laptop-to-cluster e2e suite (scripts/site/site.sh builds it): a SLURM
// cluster, an sshd login node with Lmod, /fs/scratch and /fs/ess, all in namespaces of their own,
// and a laptop that reaches them only through the stack's ssh connection. Pulumi and the runner run
// as the laptop; the test itself keeps a god's view of the site's files (SITE_ROOT) to check them.
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join, relative, resolve } from 'node:path';
import { parse, stringify } from 'yaml';
import { expect } from 'vitest';
import { clusterPresets } from '@kdgat/config';
import { runBounded } from '../e2e/harness.ts';

export const REPO = resolve(import.meta.dirname, '../../../..');
const SITE_SH = join(REPO, 'scripts', 'site', 'site.sh');
const RUNNER = join(REPO, 'apps', 'runner', 'bin', 'kdgat-runner.js');

/** The site's scratch and project roots, as on OSC. */
export const SCRATCH = '/fs/scratch/PAS1266/kd-gat';
export const PROJECT = '/fs/ess/PAS1266/kd-gat';
/** The site user's Jupyter kernels dir on the box (a home's .local/share/jupyter/kernels on OSC). */
export const KERNELS = `${PROJECT}/home/.local/share/jupyter/kernels`;

export interface Run {
  code: number;
  out: string;
  err: string;
}

export interface SshSite {
  dir: string;
  host: string;
  port: number;
  user: string;
  hostKey: string;
  laptopKey: string;
  /** The site's files as the site sees them under `/`, from this test's own view. */
  siteRoot: string;
  stack: string;
  /** The laptop's environment for Pulumi and the runner (the stack's backend and passphrase). */
  env: NodeJS.ProcessEnv;
  /** A path on the site (`/fs/…`) as this test sees it. */
  onSite(path: string): string;
  /** A command as the laptop runs it. */
  laptop(argv: string[], opts?: { timeoutMs?: number; env?: NodeJS.ProcessEnv }): Promise<Run>;
  /** `kdgat-runner ARGS` on the laptop. */
  runner(args: string[], opts?: { timeoutMs?: number }): Promise<Run>;
  /** `infra/bin/pulumi-stack.sh VERB --stack <the site's stack>` on the laptop. */
  pulumi(verb: 'up' | 'preview', extra?: string[]): Promise<Run>;
  /** A command on the login node, over SSH from the laptop (what a user would type there). */
  ssh(command: string): Promise<Run>;
  /**
   * `pulumi preview --diff` of the site's stack by a checkout of HEAD whose python/uv.lock has
   * `pkg` at version `to` instead of `from` (the repository itself is not touched).
   */
  previewWithLockBump(pkg: string, from: string, to: string): Promise<Run>;
  /** The compute nodes (c01 c02 in `gpu`, c03 in `cpu`). */
  nodes: string[];
  /** What `site.sh up` printed (KEY=VALUE). */
  facts: Record<string, string>;
  /** The node dies at once: its slurmd, its job steps and its jobs' processes are killed. */
  killNode(node: string): Run;
  /** A killed node boots again; SLURM returns it to service. */
  reviveNode(node: string): Run;
  stop(): void;
}

/** How long one command may run before it is killed (a deadline, not a speed check). */
export const COMMAND_TIMEOUT_MS = 600_000;

function pulumiBinDir(): string {
  const cache = join(process.env['HPC_TOOLS'] ?? join(homedir(), '.cache', 'kdgat-hpc'), 'pulumi');
  const versions = spawnSync('ls', [cache], { encoding: 'utf8' }).stdout.trim().split('\n').sort().reverse();
  for (const v of versions) if (existsSync(join(cache, v, 'bin', 'pulumi'))) return join(cache, v, 'bin');
  throw new Error('the Pulumi CLI is not in the tool cache: run `npm run bootstrap` first');
}

function run(argv: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Run> {
  return runBounded(argv, { env, cwd: REPO, timeoutMs, label: argv.join(' ') });
}

/** The synthetic CAN data set the quickstart makes (made here when missing), for the site's /fs/ess. */
function synthData(): string {
  const dir = join(REPO, '.hpc', 'data', 'raw', 'synth');
  if (!existsSync(dir)) {
    const r = spawnSync(
      join(REPO, 'python', '.venv', 'bin', 'python'),
      ['-m', 'kdgat', 'synth', '--out', dir, '--messages', '120000'],
      { cwd: REPO, encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`kdgat synth failed:\n${r.stdout}${r.stderr}`);
  }
  return dir;
}

/** The site's partitions as the stack declares them: what site.sh gave each node (its facts). */
export function boxPartitions(facts: Record<string, string>): Record<string, unknown>[] {
  const node = {
    coresPerNode: Number(facts['NODE_CPUS']),
    memPerNodeGB: Math.floor(Number(facts['NODE_MEM_MB']) / 1024),
  };
  const gpuNode = { ...node, gpuType: 'v100', gpusPerNode: 1, gpuMemGB: 16 };
  return [
    { name: 'gpu', ...gpuNode, maxWalltime: '7-00:00:00' },
    { name: 'gpudebug', ...gpuNode, maxWalltime: '01:00:00' },
    { name: 'cpu', ...node, gpusPerNode: 0, maxWalltime: '7-00:00:00' },
  ];
}

/**
 * The site's second cluster as the stack declares it (`clusters`): site.sh's kdgat-annex, one node
 * (c04) with an a100, under the same slurmdbd and reached from the same login node with `-M`. Its
 * rates are twice the first cluster's, so `--cluster auto` takes it only when it starts sooner.
 */
export function annexCluster(facts: Record<string, string>): Record<string, unknown> {
  return {
    name: 'kdgat-annex',
    clusterName: facts['ANNEX_CLUSTER'],
    defaultPartition: 'gpu',
    scratchPurgeDays: 60,
    modules: { cuda: 'cuda/12.4.1', init: '/etc/profile.d/lmod.sh' },
    partitions: [
      {
        name: 'gpu',
        coresPerNode: Number(facts['NODE_CPUS']),
        memPerNodeGB: Math.floor(Number(facts['NODE_MEM_MB']) / 1024),
        gpuType: 'a100',
        gpusPerNode: 1,
        gpuMemGB: 40,
        maxWalltime: '7-00:00:00',
      },
    ],
    charging: {
      unit: 'SU',
      source: "the box's annex: illustrative, twice the first cluster's rates",
      wholeNodesWhenMultiNode: true,
      partitions: { gpu: { coreHour: 2, gpuHour: 20 } },
    },
  };
}

/**
 * The box as a cluster profile beside the specs, `<site>/laptop/box-cluster.yaml` (the `local`
 * preset with the box's partitions and charging), so that a spec can name the `cpu` and `gpu`
 * partitions (`cluster: box-cluster.yaml`): the stack declares the same partitions.
 */
export function writeBoxProfile(
  site: Pick<SshSite, 'dir' | 'facts'>,
  /** Another name and fields of the profile's (a per-user limit declared lowered). */
  variant?: { file: string; fields: Record<string, unknown> },
): string {
  const profile = {
    ...clusterPresets.local,
    name: 'kdgat-site',
    clusterName: 'kdgat-site',
    scheduler: 'slurm',
    partitions: boxPartitions(site.facts),
    charging: {
      ...clusterPresets.local.charging,
      partitions: {
        gpu: { coreHour: 1, gpuHour: 10 },
        gpudebug: { coreHour: 1, gpuHour: 10 },
        cpu: { coreHour: 1, gpuHour: 0 },
      },
    },
  };
  const file = join(site.dir, 'laptop', variant?.file ?? 'box-cluster.yaml');
  writeFileSync(file, stringify({ ...profile, ...variant?.fields }));
  return file;
}

/**
 * The site stack's configuration (its `kdgat-hpc:` keys without the namespace): the box's SSH
 * connection, partitions, charging, paths, clusters, environments, datasets and build.
 */
export function siteStackConfig(facts: Record<string, string>): Record<string, unknown> {
  return {
    cluster: 'local',
    clusterOverrides: {
      name: 'kdgat-site',
      clusterName: 'kdgat-site',
      scheduler: 'slurm',
      connection: {
        kind: 'ssh',
        host: facts['SITE_HOST'],
        port: Number(facts['SITE_PORT']),
        user: facts['SITE_USER'],
        hostKey: facts['SITE_HOST_KEY'],
        privateKeyPath: facts['LAPTOP_KEY'],
        // The box's login node serves only these tests: --wait may poll it every 2 to 5 s (a real
        // site keeps the default 5 to 30 s).
        poll: { minSeconds: 2, maxSeconds: 5 },
      },
      modules: { cuda: 'cuda/12.4.1', init: '/etc/profile.d/lmod.sh' },
      // The box's partitions as site.sh declares them to SLURM (two GPU nodes, one CPU node).
      partitions: boxPartitions(facts),
      charging: {
        partitions: {
          gpu: { coreHour: 1, gpuHour: 10 },
          gpudebug: { coreHour: 1, gpuHour: 10 },
          cpu: { coreHour: 1, gpuHour: 0 },
        },
      },
      paths: {
        projectRoot: PROJECT,
        scratchRoot: SCRATCH,
        homeCacheRoot: `${PROJECT}/home-cache`,
        logsDir: `${SCRATCH}/logs`,
        kernelsDir: KERNELS,
      },
    },
    // The site's other cluster (site.sh's kdgat-annex), sharing the login node, account and paths.
    clusters: [annexCluster(facts)],
    // Two environments, as a site has several: the spec's cpu-local, and cpu-stage (the same venv
    // spec under its own name and prefix) that the examples suite gives a stage of its own.
    // cpu-local has a notebook kernel (in KERNELS, where OnDemand's Jupyter app would look).
    environments: [
      { preset: 'cpu-local', kernel: { displayName: 'KD-GAT (cpu-local)' } },
      { preset: 'cpu-local', name: 'cpu-stage' },
      // A researcher's own pipeline (examples/pipelines/tiny-lightning): its own uv.lock's pins.
      { file: join(REPO, 'examples', 'pipelines', 'tiny-lightning.environment.yaml') },
    ],
    // synth: every suite's; shardset and shardref: the cluster suite's sharded preprocess and its one-job reference.
    datasets: ['synth', 'shardset', 'shardref'],
    // Where the site keeps their raw recordings (<root>/<dataset>, on /fs/ess as at OSC): the jobs
    // export it as the pipeline's raw-data variable (kdgat: KD_GAT_DATA_ROOT); nothing else sets it.
    rawDataRoot: '/fs/ess/data/raw',
    // The site's Python: the venv of the tests' own lock, seen on the site under the same path.
    build: {
      frontend: 'pip',
      frontendCommand: join(REPO, 'python', '.venv', 'bin', 'python'),
      inheritEnvironments: [join(REPO, 'python', '.venv')],
    },
  };
}

export async function startSite(): Promise<SshSite> {
  const dir = mkdtempSync('/var/tmp/kdgat-ssh-site-');
  // A stack of its own per site: the laptop keeps its copies of a stack's runs under .hpc/sites/<stack>.
  const stack = `site-${dir
    .slice(-6)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, 'x')}`;
  const up = spawnSync('bash', [SITE_SH, 'up', dir], { encoding: 'utf8', timeout: 180_000 });
  if (up.status !== 0) {
    spawnSync('bash', [SITE_SH, 'down', dir]);
    throw new Error(`the site did not start:\n${up.stdout}${up.stderr}`);
  }
  const facts = Object.fromEntries(
    up.stdout
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  ) as Record<string, string>;
  const siteRoot = facts['SITE_ROOT']!;
  const onSite = (p: string) => join(siteRoot, 'fs', relative('/fs', p));
  // The site's raw data, as a site has it on its project space before anyone runs anything.
  cpSync(synthData(), onSite('/fs/ess/data/raw/synth'), { recursive: true });

  // A Pulumi project of the laptop's: a temporary backend and stack, main = the repository's infra.
  const project = join(dir, 'laptop', 'pulumi');
  mkdirSync(join(project, 'backend'), { recursive: true });
  const pulumiYaml = parse(readFileSync(join(REPO, 'infra', 'Pulumi.yaml'), 'utf8')) as Record<
    string,
    unknown
  >;
  pulumiYaml['main'] = relative(project, join(REPO, 'infra', 'index.ts'));
  writeFileSync(join(project, 'Pulumi.yaml'), stringify(pulumiYaml));
  symlinkSync(join(REPO, 'node_modules'), join(project, 'node_modules'));
  const bin = pulumiBinDir();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${bin}${delimiter}${process.env['PATH']}`,
    PULUMI_BACKEND_URL: `file://${join(project, 'backend')}`,
    PULUMI_CONFIG_PASSPHRASE: 'kdgat-site-e2e',
    PULUMI_HOME: join(project, '.pulumi-home'),
    HPC_INFRA_DIR: project,
    NO_COLOR: '1',
  };
  const config = siteStackConfig(facts);
  const namespaced = Object.fromEntries(Object.entries(config).map(([k, v]) => [`kdgat-hpc:${k}`, v]));
  const init = spawnSync('pulumi', ['stack', 'init', stack, '--non-interactive'], {
    cwd: project,
    env,
    encoding: 'utf8',
  });
  if (init.status !== 0) throw new Error(`pulumi stack init failed:\n${init.stdout}${init.stderr}`);
  const stackFile = join(project, `Pulumi.${stack}.yaml`);
  const current = (parse(readFileSync(stackFile, 'utf8')) ?? {}) as Record<string, unknown>;
  writeFileSync(stackFile, stringify({ ...current, config: namespaced }));

  const laptop: SshSite['laptop'] = (argv, opts = {}) =>
    run(
      ['bash', SITE_SH, 'laptop', dir, '--', ...argv],
      opts.env ?? env,
      opts.timeoutMs ?? COMMAND_TIMEOUT_MS,
    );
  const knownHosts = join(dir, 'laptop', 'known_hosts');
  writeFileSync(knownHosts, `${facts['SITE_HOST']} ${facts['SITE_HOST_KEY']}\n`);
  return {
    dir,
    host: facts['SITE_HOST']!,
    port: Number(facts['SITE_PORT']),
    user: facts['SITE_USER']!,
    hostKey: facts['SITE_HOST_KEY']!,
    laptopKey: facts['LAPTOP_KEY']!,
    siteRoot,
    stack,
    env,
    onSite,
    laptop,
    runner: (args, opts = {}) => laptop(['node', RUNNER, ...args], opts),
    pulumi: (verb, extra = []) =>
      laptop(['bash', join(REPO, 'infra', 'bin', 'pulumi-stack.sh'), verb, '--stack', stack, ...extra]),
    ssh: (command) =>
      laptop([
        'ssh',
        '-o',
        'BatchMode=yes',
        '-o',
        `UserKnownHostsFile=${knownHosts}`,
        '-o',
        'LogLevel=ERROR',
        '-i',
        facts['LAPTOP_KEY']!,
        `${facts['SITE_USER']}@${facts['SITE_HOST']}`,
        command,
      ]),
    previewWithLockBump: async (pkg, from, to) => {
      const checkout = programCheckout(join(dir, 'laptop', 'checkout'));
      const lockFile = join(checkout, 'python', 'uv.lock');
      const lock = readFileSync(lockFile, 'utf8');
      const entry = `[[package]]\nname = "${pkg}"\nversion = "${from}"\n`;
      if (!lock.includes(entry)) throw new Error(`python/uv.lock has no ${pkg} ${from}`);
      writeFileSync(lockFile, lock.replace(entry, `[[package]]\nname = "${pkg}"\nversion = "${to}"\n`));
      // The same stack and backend, its program taken from that checkout.
      const bumped = join(dir, 'laptop', 'pulumi-bumped');
      mkdirSync(bumped, { recursive: true });
      writeFileSync(
        join(bumped, 'Pulumi.yaml'),
        stringify({ ...pulumiYaml, main: relative(bumped, join(checkout, 'infra', 'index.ts')) }),
      );
      cpSync(stackFile, join(bumped, `Pulumi.${stack}.yaml`));
      if (!existsSync(join(bumped, 'node_modules')))
        symlinkSync(join(checkout, 'node_modules'), join(bumped, 'node_modules'));
      return laptop(['bash', join(REPO, 'infra', 'bin', 'pulumi-stack.sh'), 'preview', '--stack', stack], {
        env: { ...env, HPC_INFRA_DIR: bumped },
      });
    },
    nodes: facts['NODES']!.split(' '),
    facts,
    killNode: (node) => siteCommand('kill-node', dir, node),
    reviveNode: (node) => siteCommand('revive-node', dir, node),
    stop: () => {
      spawnSync('bash', [SITE_SH, 'down', dir], { stdio: 'inherit', timeout: 120_000 });
      rmSync(join(REPO, '.hpc', 'sites', stack), { recursive: true, force: true });
    },
  };
}

function siteCommand(verb: string, ...args: string[]): Run {
  const r = spawnSync('bash', [SITE_SH, verb, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status ?? 1, out: r.stdout, err: r.stderr };
}

/**
 * A checkout of HEAD at `dir` (git archive) whose node_modules are the repository's, but for the
 * workspace packages, which point into the checkout itself: a program run from there reads the
 * checkout's files (python/uv.lock) and nothing of the repository's own.
 */
function programCheckout(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const archive = spawnSync(
    'sh',
    ['-c', 'git -C "$1" archive --format=tar HEAD | tar -x -C "$2"', 'sh', REPO, dir],
    {
      encoding: 'utf8',
    },
  );
  if (archive.status !== 0) throw new Error(`git archive HEAD failed: ${archive.stderr}`);
  const modules = join(REPO, 'node_modules');
  mkdirSync(join(dir, 'node_modules', '@kdgat'), { recursive: true });
  for (const entry of readdirSync(modules)) {
    if (entry === '@kdgat') continue;
    symlinkSync(join(modules, entry), join(dir, 'node_modules', entry));
  }
  // Workspace links are relative (../../libs/config): the same text points into the checkout.
  for (const pkg of readdirSync(join(modules, '@kdgat')))
    symlinkSync(readlinkSync(join(modules, '@kdgat', pkg)), join(dir, 'node_modules', '@kdgat', pkg));
  for (const nested of ['libs/config', 'infra']) {
    const own = join(REPO, nested, 'node_modules');
    if (existsSync(own) && !existsSync(join(dir, nested, 'node_modules')))
      symlinkSync(own, join(dir, nested, 'node_modules'));
  }
  return dir;
}

/** What a command said, for assertion messages. */
export const said = (r: Run) =>
  `exit ${r.code}\n--- stdout\n${r.out.slice(-4000)}\n--- stderr\n${r.err.slice(-4000)}`;

export function expectOk(r: Run): Run {
  expect(r.code, said(r)).toBe(0);
  return r;
}

/** `run dir: SITE_PATH on the site; local copy: LOCAL` */
export function runDirsOf(out: string): { site: string; local: string } {
  const m = /^run dir: (\S+) on the site; local copy: (\S+)$/m.exec(out);
  if (!m) throw new Error(`no "run dir: … on the site; local copy: …" line in:\n${out}`);
  return { site: m[1]!, local: m[2]! };
}

export interface StatusJob {
  key: string;
  jobId?: string;
  tasks: {
    state: string;
    restarts?: number;
    nodes?: string[];
    accounting?: {
      cpuSeconds: number;
      maxRssMB: number | null;
      totalRssMB?: number | null;
      elapsedSeconds: number;
      allocCpus: number;
    };
  }[];
}

/** `status RUN --json` from the laptop. */
export async function statusOfRun(site: SshSite, localRunDir: string): Promise<StatusJob[]> {
  const r = expectOk(await site.runner(['status', localRunDir, '--json']));
  return JSON.parse(r.out) as StatusJob[];
}

/** How long a test waits for one thing on the site (a deadline, not a speed check). */
export const WAIT_MS = 240_000;

/** Polls `probe` (at most every 2 s, at most WAIT_MS) until it returns something; says what it waited for. */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${WAIT_MS / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2000));
  }
}
