// Every spec under examples/ end to end on a site reached over SSH (apps/runner/test/site/site.ts: a
// SLURM cluster behind an sshd login node, in namespaces of its own; the runner runs as a laptop that
// reaches it only through the stack's ssh connection), with the real pipeline on synthetic data,
// shrunk by the one test-only override in shrink.ts (documented there; the files under examples/
// are never edited). A new example is picked up by the folder glob. Examples that read an earlier
// run (`inputs: - run: <experiment>`) start when the example that makes that experiment has
// finished; the rest start at once and run side by side as far as the SLURM node allows. Specs with
// a `tune:` section run as studies (`runner tune`).
// Asserts: every job and array task COMPLETED, inputs from earlier runs recorded and linked, and the
// GPU-only settings (use_cugraph, 16-mixed) took their CPU fallback and said so in the job logs.
// Each run's files are checked in the laptop's local copy (brought back by --wait and status).
// Run by scripts/test.sh (root: the site needs namespaces).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { parseYaml } from '@kdgat/config';
import { startSite, type SshSite } from '../../apps/runner/test/site/site.ts';
import { shrinkForTest, type Json } from './shrink.ts';

const repo = resolve(import.meta.dirname, '../..');
let site: SshSite;

type Obj = { [k: string]: Json };
interface Example {
  file: string;
  name: string;
  spec: Obj;
  /** Example names whose runs this one reads. */
  after: string[];
}

/** `kdgat-runner ARGS` on the laptop; out is stdout then stderr. */
async function runner(
  args: string[],
): Promise<{ code: number; out: string; stdout: string; seconds: number }> {
  const t0 = Date.now();
  const r = await site.runner(args, { timeoutMs: 1_200_000 });
  return {
    code: r.code,
    out: `${r.out}${r.err}`,
    stdout: r.out,
    seconds: Math.round((Date.now() - t0) / 1000),
  };
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

before(async () => {
  // The site with the synthetic data set on its /fs/ess, provisioned by `infra:up` over SSH.
  site = await startSite();
  // Setup only (site.test.ts checks what up provisions): no preview before the update.
  const up = await site.pulumi('up', ['--summary', '--skip-preview']);
  assert.equal(up.code, 0, `infra:up of the site's stack failed:\n${up.out}${up.err}`);
});

after(() => site?.stop());

test('every example under examples/ runs to COMPLETED on the site over SSH with the real pipeline', async () => {
  const examples = loadExamples();
  const tag = `e2e${Date.now().toString(36)}`;
  const renames = new Map(examples.map((e) => [e.name, `${e.name}-${tag}`]));
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-examples-'));
  // The box's second environment (site.ts: cpu-stage, the cpu-local spec under its own name), for
  // stages that name their own environment (kdgat-pitzer's preprocess runs in gnn-cpu).
  const stageEnvironment = join(dir, 'cpu-stage.yaml');
  writeFileSync(stageEnvironment, "name: cpu-stage\nbackend: venv\npython: '3.11'\npipelinePins: true\n");
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
        writeFileSync(
          file,
          `${JSON.stringify(shrinkForTest(e.spec, tag, renames, stageEnvironment, join(repo, 'examples')), null, 2)}\n`,
        );
        const command = e.spec['tune'] ? 'tune' : 'train';
        return {
          e,
          r: await runner([
            command,
            '--spec',
            file,
            '--stack',
            site.stack,
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
    // The laptop's copy of the run (the site's path is in the manifest).
    const runDir = /^run dir: \S+ on the site; local copy: (\S+)$/m.exec(r.out)?.[1];
    assert.ok(runDir, `no run dir in:\n${r.out.slice(-2000)}`);
    const manifest = JSON.parse(readFileSync(join(runDir, 'manifest.json'), 'utf8')) as {
      jobs: { key: string; array?: { size: number } }[];
      inputs?: { stageId: string; runDir: string; linkedAs: string[]; dir: string }[];
      tune?: { study: string };
      environment: { name: string; lockHash: string };
      otherEnvironments?: { name: string; lockHash: string; lockFile?: string }[];
      resolved: {
        stages: { id: string; environment: string }[];
        pipeline?: { name: string; outputs?: { metrics?: string } };
      };
    };
    // A researcher's own pipeline (examples/tiny-lightning.yaml): its own environment, its command.
    const pipeline = manifest.resolved.pipeline?.name ?? 'kdgat';
    // Stages that name their own environment ran in the site's second one, recorded with its lock.
    const own = ((e.spec['stages'] as Obj[]) ?? []).filter((st) => typeof st['environment'] === 'string');
    if (pipeline === 'kdgat') assert.equal(manifest.environment.name, 'cpu-local');
    else assert.equal(manifest.environment.name, pipeline, `examples/${e.file}: its own environment`);
    if (own.length > 0) {
      assert.deepEqual(
        manifest.otherEnvironments?.map((o) => o.name),
        ['cpu-stage'],
        `examples/${e.file}`,
      );
      const lockFile = manifest.otherEnvironments![0]!.lockFile!;
      assert.ok(readFileSync(join(runDir, lockFile), 'utf8').length > 0, `examples/${e.file}: ${lockFile}`);
      for (const st of own)
        assert.equal(manifest.resolved.stages.find((x) => x.id === st['id'])?.environment, 'cpu-stage');
    }
    // Every job and every array task COMPLETED, as the scheduler reports them.
    const status = await runner(['status', runDir, '--json']);
    assert.equal(status.code, 0, status.out);
    const jobs = JSON.parse(status.stdout) as {
      key: string;
      tasks: { state: string }[];
    }[];
    for (const j of manifest.jobs) {
      const tasks = jobs.find((x) => x.key === j.key)?.tasks ?? [];
      assert.equal(tasks.length, j.array?.size ?? 1, `examples/${e.file} ${j.key}: ${JSON.stringify(tasks)}`);
      for (const t of tasks)
        assert.equal(t.state, 'COMPLETED', `examples/${e.file} ${j.key}: ${JSON.stringify(t)}`);
    }
    // A study's report by its name, from the laptop (its journal brought back from the site).
    if (e.spec['tune']) {
      const study = String(manifest.tune?.study);
      const report = await runner(['tune-report', '--study', study, '--stack', site.stack, '--json']);
      assert.equal(report.code, 0, report.out);
      const figures = JSON.parse(report.stdout) as { counts: Record<string, number> };
      // shrink.ts: 2 trials, no pruner
      assert.equal(figures.counts['COMPLETE'], 2, `examples/${e.file}: ${report.stdout.slice(0, 2000)}`);
      // The best trial trained from the laptop, the study looked up by name in the local copy.
      if (e.file === 'tune-vgae.yaml') {
        const best = await runner([
          'train',
          '--spec',
          join(dir, e.file),
          '--from-study',
          study,
          '--best',
          '--stack',
          site.stack,
          '--scheduler',
          'slurm',
          '--wait',
        ]);
        assert.equal(best.code, 0, best.out.slice(-4000));
        assert.match(best.out, new RegExp(`best trial \\d+ of study ${study}`));
        assert.match(best.out, /all \d+ task\(s\) completed/);
      }
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
    if (pipeline !== 'kdgat') {
      // What every job of it leaves: the declared metrics file in each task's dir, and a job record.
      const metrics = manifest.resolved.pipeline?.outputs?.metrics ?? 'metrics.json';
      const dirs = readdirSync(join(runDir, 'outputs'), { recursive: true, encoding: 'utf8' });
      const finished = dirs.filter((d) => d.endsWith(`/${metrics}`));
      assert.equal(
        finished.length,
        manifest.jobs.reduce((n, j) => n + (j.array?.size ?? 1), 0),
        `examples/${e.file}: ${dirs.join(', ')}`,
      );
      for (const f of finished)
        assert.ok(
          dirs.includes(f.replace(metrics, 'job_record.jsonl')),
          `examples/${e.file}: no job record beside ${f}`,
        );
      assert.match(
        logs,
        new RegExp(`The ${pipeline} pipeline|running python -m `),
        `examples/${e.file}: ${logs.slice(-1500)}`,
      );
      continue;
    }
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
