// The README's commands as a user types them: `npx nx run runner:…` / `infra:…` started by the
// system's Node (20 here, which cannot run the TypeScript sources), through the real nx. They run
// with the toolchain's Node and Pulumi; in a checkout that is not bootstrapped they stop with one
// line saying what to run. `runner plan` of the osc-pitzer spec works before that site exists.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { after, test } from 'node:test';

const repo = resolve(import.meta.dirname, '../../..');
const tools = process.env['HPC_TOOLS'] ?? join(homedir(), '.cache/kdgat-hpc');

/** PATH as the user's shell has it: without the toolchain's Node and the repository's .bin. */
const systemPath = (process.env['PATH'] ?? '')
  .split(delimiter)
  .filter((p) => !p.startsWith(tools) && !p.startsWith(join(repo, 'node_modules')))
  .join(delimiter);
const backend = mkdtempSync(join(tmpdir(), 'kdgat-typed-backend-'));
after(() => rmSync(backend, { recursive: true, force: true }));

function typed(args: string[], extraEnv: Record<string, string> = {}) {
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: systemPath, ...extraEnv };
  for (const k of ['HPC_REPO', 'PULUMI_HOME']) delete env[k];
  // A stack store of its own: osc-pitzer is certainly not provisioned there.
  env['PULUMI_BACKEND_URL'] = `file://${backend}`;
  env['PULUMI_CONFIG_PASSPHRASE'] = 'kdgat-local';
  const r = spawnSync('npx', ['nx', ...args], { cwd: repo, env, encoding: 'utf8', timeout: 300_000 });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

const systemNode = spawnSync('node', ['--version'], {
  env: { ...process.env, PATH: systemPath },
  encoding: 'utf8',
});

test('the system Node is the one that starts nx here', () => {
  assert.equal(systemNode.status, 0, 'no system node on PATH');
  // The point of these tests is a Node that cannot run the sources; say which one it was.
  process.stdout.write(`# system node ${systemNode.stdout.trim()}\n`);
});

test('runner plan of the osc-pitzer spec before the site is provisioned', () => {
  const before = new Set(
    existsSync(join(repo, '.hpc/plans/osc-pitzer/kdgat-hcrl-sa'))
      ? readdirSync(join(repo, '.hpc/plans/osc-pitzer/kdgat-hcrl-sa'))
      : [],
  );
  const r = typed(['run', 'runner:plan', '--spec', 'examples/kdgat-pitzer.yaml', '--stack', 'osc-pitzer']);
  assert.equal(r.code, 0, r.out);
  assert.doesNotMatch(r.out, /ERR_UNKNOWN_FILE_EXTENSION/);
  assert.match(r.out, /stack osc-pitzer is not provisioned/);
  assert.match(r.out, /predicted, not read from the stack: scratch/);
  assert.match(r.out, /unknown until provisioned: environment lock/);
  assert.match(
    r.out,
    /run dir on the site \(in the scripts\): \/fs\/scratch\/PAS1266\/kd-gat\/runs\/kdgat-hcrl-sa\//,
  );
  const skipped =
    r.out.match(
      /preflight: bash -n passed; sbatch --test-only SKIPPED: stack osc-pitzer is not provisioned/g,
    ) ?? [];
  // One per stage of kdgat-pitzer.yaml: preprocess, autoencoder, curriculum, distillation, evaluation.
  assert.equal(skipped.length, 5, r.out);
  assert.match(r.out, /nothing submitted \(plan\)/);
  const planDir = /^plan written to: (.+)$/m.exec(r.out)?.[1];
  assert.ok(planDir?.startsWith(join(repo, '.hpc/plans/osc-pitzer/')), r.out);
  try {
    assert.ok(!before.has(planDir.split('/').pop()!));
    const script = readFileSync(join(planDir, 'scripts/autoencoder.sbatch'), 'utf8');
    assert.match(script, /^#SBATCH --account=PAS1266$/m);
    assert.match(script, /^hpc_cuda_module=cuda\/12\.4\.1$/m);
    assert.match(script, /^hpc_stage_datasets=\(\n {2}hcrl_sa \/fs\/scratch\/PAS1266\/kd-gat\/cache\/hcrl_sa\n\)$/m);
    const manifest = JSON.parse(readFileSync(join(planDir, 'manifest.json'), 'utf8'));
    assert.equal(manifest.stack.source, 'declared stack configuration (not provisioned)');
    assert.equal(manifest.submission.status, 'planned');
  } finally {
    rmSync(planDir, { recursive: true, force: true });
  }
});

test('runner train still needs the provisioned stack', () => {
  const r = typed(['run', 'runner:train', '--spec', 'examples/kdgat-pitzer.yaml', '--stack', 'osc-pitzer']);
  assert.notEqual(r.code, 0, r.out);
  assert.match(r.out, /run `pulumi up` on stack osc-pitzer first/);
});

test('infra preview runs with the toolchain Node and Pulumi', () => {
  const r = typed(['run', 'infra:preview', '--stack', 'local']);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /to create/);
});

test('a checkout that is not bootstrapped: one line saying what to run, no stack trace', (t) => {
  if (Number(systemNode.stdout.replace(/^v/, '').split('.')[0]) >= 22) {
    t.skip('the system Node is >= 22 and runs the sources itself: there is no missing Node to report');
    return;
  }
  for (const target of [
    ['runner:plan', '--spec', 'examples/quickstart.yaml'],
    ['infra:preview', '--stack', 'local'],
  ]) {
    const r = typed(['run', ...target], { HPC_TOOLS: join(backend, 'no-toolchain-here') });
    assert.notEqual(r.code, 0, r.out);
    const ours = r.out.split('\n').filter((l) => /not bootstrapped/.test(l));
    assert.equal(ours.length, 1, r.out);
    assert.match(
      ours[0]!,
      /^with-toolchain: this checkout is not bootstrapped \(Node [\d.]+ is missing\): run `npm run bootstrap`$/,
    );
    assert.doesNotMatch(r.out, /^\s+at /m, 'a stack trace');
  }
});
