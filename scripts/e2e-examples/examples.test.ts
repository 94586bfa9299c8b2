// Every spec under examples/ end to end on the local SLURM with the real pipeline on synthetic data,
// shrunk by the one test-only override in shrink.ts (documented there; the files under examples/
// are never edited). A new example is picked up by the folder glob. Examples that read an earlier
// run (`inputs: - run: <experiment>`) start when the example that makes that experiment has
// finished; the rest start at once and run side by side as far as the SLURM node allows. Specs with
// a `tune:` section run as studies (`runner tune`).
// Asserts: every job and array task COMPLETED, inputs from earlier runs recorded and linked, and the
// GPU-only settings (use_cugraph, 16-mixed) took their CPU fallback and said so in the job logs.
// Run by scripts/test.sh after the local SLURM is up.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { before, test } from 'node:test';
import { parseYaml } from '@kdgat/config';
import { shrinkForTest, type Json } from './shrink.ts';

const repo = resolve(import.meta.dirname, '../..');
const env = {
  ...process.env,
  KD_GAT_DATA_ROOT: process.env['KD_GAT_DATA_ROOT'] ?? join(repo, '.hpc/data/raw'),
};
const RUNNER = join(repo, 'apps/runner/bin/kdgat-runner.js');

type Obj = { [k: string]: Json };
interface Example {
  file: string;
  name: string;
  spec: Obj;
  /** Example names whose runs this one reads. */
  after: string[];
}

function runSync(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { cwd: repo, encoding: 'utf8', timeout: 900_000, env });
  const out = `${r.stdout}${r.stderr}`;
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} failed:\n${out.slice(-4000)}`);
  return out;
}

function runner(args: string[]): Promise<{ code: number; out: string; seconds: number }> {
  const t0 = Date.now();
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [RUNNER, ...args], { cwd: repo, env });
    let out = '';
    child.stdout.on('data', (d) => (out += String(d)));
    child.stderr.on('data', (d) => (out += String(d)));
    const timer = setTimeout(() => child.kill('SIGTERM'), 1_200_000);
    child.on('error', rej);
    child.on('close', (code) => {
      clearTimeout(timer);
      res({ code: code ?? 1, out, seconds: Math.round((Date.now() - t0) / 1000) });
    });
  });
}

function loadExamples(): Example[] {
  const dir = join(repo, 'examples');
  const files = readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort();
  const examples = files.map((f) => {
    const parsed = parseYaml(readFileSync(join(dir, f), 'utf8'), join(dir, f));
    assert.equal(parsed.syntaxIssues.length, 0, `examples/${f}: ${JSON.stringify(parsed.syntaxIssues)}`);
    const spec = parsed.value as Obj;
    const runs = ((spec['stages'] as Obj[]) ?? []).flatMap((s) =>
      ((s['inputs'] as Obj[]) ?? []).map((i) => String(i['run'])),
    );
    return { file: f, name: String(spec['name']), spec, after: [...new Set(runs)] };
  });
  const names = new Set(examples.map((e) => e.name));
  for (const e of examples)
    for (const a of e.after)
      assert.ok(names.has(a), `examples/${e.file} reads runs of experiment ${a}, which no example makes`);
  return examples;
}

/** Fails on examples that read each other's runs in a cycle (none could start). */
function checkNoCycle(examples: Example[]): void {
  const done = new Set<string>();
  let left = examples;
  while (left.length > 0) {
    const ready = left.filter((e) => e.after.every((a) => done.has(a)));
    assert.ok(
      ready.length > 0,
      `examples read each other's runs in a cycle: ${left.map((e) => e.file).join(', ')}`,
    );
    for (const e of ready) done.add(e.name);
    left = left.filter((e) => !ready.includes(e));
  }
}

const deep = (v: Json | undefined, pred: (k: string, v: Json) => boolean): boolean =>
  !!v && typeof v === 'object' && Object.entries(v).some(([k, x]) => pred(k, x) || deep(x, pred));

before(() => {
  // The synthetic data set and the provisioned local stack (both also made by `npm run quickstart`).
  if (!existsSync(join(env.KD_GAT_DATA_ROOT, 'synth')))
    runSync('python/.venv/bin/python', [
      '-m',
      'kdgat',
      'synth',
      '--out',
      join(env.KD_GAT_DATA_ROOT, 'synth'),
      '--messages',
      '120000',
    ]);
  runSync('scripts/with-toolchain.sh', ['nx', 'run', 'infra:up', '--stack', 'local', '--outputStyle=stream']);
});

test('every example under examples/ runs to COMPLETED on the local SLURM with the real pipeline', async () => {
  const examples = loadExamples();
  const tag = `e2e${Date.now().toString(36)}`;
  const renames = new Map(examples.map((e) => [e.name, `${e.name}-${tag}`]));
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-examples-'));
  const t0 = Date.now();
  const timings: string[] = [];
  checkNoCycle(examples);
  // Each example starts as soon as the examples whose runs it reads have finished.
  const finished = new Map<string, Promise<{ e: Example; r: Awaited<ReturnType<typeof runner>> }>>();
  const start = (e: Example): Promise<{ e: Example; r: Awaited<ReturnType<typeof runner>> }> => {
    let p = finished.get(e.name);
    if (!p) {
      p = Promise.all(e.after.map((a) => start(examples.find((x) => x.name === a)!))).then(async (deps) => {
        for (const d of deps)
          if (d.r.code !== 0)
            return { e, r: { code: 1, out: `not run: examples/${d.e.file} failed`, seconds: 0 } };
        const file = join(dir, e.file);
        writeFileSync(file, `${JSON.stringify(shrinkForTest(e.spec, tag, renames), null, 2)}\n`);
        const command = e.spec['tune'] ? 'tune' : 'train';
        return {
          e,
          r: await runner([
            command,
            '--spec',
            file,
            '--stack',
            'local',
            '--scheduler',
            'slurm',
            '--wait',
            '--force',
          ]),
        };
      });
      finished.set(e.name, p);
    }
    return p;
  };
  const results = await Promise.all(examples.map(start));
  for (const { e, r } of results) {
    timings.push(`${e.file} ${r.seconds}s`);
    assert.equal(r.code, 0, `examples/${e.file} did not finish:\n${r.out.slice(-5000)}`);
    const runDir = /^run dir: (\S+)$/m.exec(r.out)?.[1];
    assert.ok(runDir, `no run dir in:\n${r.out.slice(-2000)}`);
    const manifest = JSON.parse(readFileSync(join(runDir, 'manifest.json'), 'utf8')) as {
      jobs: { key: string; array?: { size: number } }[];
      inputs?: { stageId: string; runDir: string; linkedAs: string[]; dir: string }[];
    };
    // Every job and every array task COMPLETED, as the scheduler reports them.
    const status = await runner(['status', runDir, '--json']);
    assert.equal(status.code, 0, status.out);
    const jobs = JSON.parse(status.out.slice(status.out.indexOf('['))) as {
      key: string;
      tasks: { state: string }[];
    }[];
    for (const j of manifest.jobs) {
      const tasks = jobs.find((x) => x.key === j.key)?.tasks ?? [];
      assert.equal(tasks.length, j.array?.size ?? 1, `examples/${e.file} ${j.key}: ${JSON.stringify(tasks)}`);
      for (const t of tasks)
        assert.equal(t.state, 'COMPLETED', `examples/${e.file} ${j.key}: ${JSON.stringify(t)}`);
    }
    // Inputs from earlier runs: recorded with the run this suite made, and linked into this run.
    if (e.after.length > 0) {
      assert.ok(manifest.inputs?.length, `examples/${e.file}: no inputs recorded`);
      for (const i of manifest.inputs) {
        assert.match(i.runDir, new RegExp(`/${renames.get(e.after[0]!)!}/`));
        for (const rel of i.linkedAs) assert.equal(readlinkSync(join(runDir, rel)), i.dir);
      }
    }
    // GPU-only settings took their honest CPU fallback, and said so.
    const logs = readdirSync(join(runDir, 'logs'))
      .map((f) => readFileSync(join(runDir, 'logs', f), 'utf8'))
      .join('\n');
    if (deep(e.spec, (k, v) => /use_cugraph$/.test(k) && v === true))
      assert.match(
        logs,
        /use_cugraph=True but CuGraphGATConv cannot run here/,
        `examples/${e.file}: no cuGraph fallback in the logs`,
      );
    const trains = ((e.spec['stages'] as Obj[]) ?? []).some((s) => s['stage'] !== 'preprocess');
    if (trains && !deep(e.spec, (k, v) => k === 'training.precision' && v === '32'))
      assert.match(
        logs,
        /precision 16-mixed needs a GPU: training in 32-bit on CPU/,
        `examples/${e.file}: no precision fallback in the logs`,
      );
    // Two 1-core jobs share the node: each pipeline runs one compute thread, not one per core.
    assert.match(
      logs,
      /compute threads: 1 \(SLURM_CPUS_PER_TASK/,
      `examples/${e.file}: the pipeline did not match its threads to its 1-core allocation`,
    );
  }
  console.log(
    `examples suite: ${examples.length} examples in ${Math.round((Date.now() - t0) / 1000)} s (${timings.join(', ')})`,
  );
});
