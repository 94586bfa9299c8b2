// Cost, history and the run report end to end on the real one-node SLURM: a run leaves job records,
// a second plan of the same spec sizes its requests from them, `train --right-size` applies them, a
// plan over its budget is refused with the figures, the balance comes from a site command on PATH,
// and `report` draws a run and a 12-point sweep into a page Chromium opens without errors.
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { clusterPresets } from '@kdgat/config';
import { parseJobRecords, tasksOfRun } from '@kdgat/usage';
import { beforeAll, describe, expect, it } from 'vitest';
import { readManifest } from '@kdgat/run-record';
import { checkPage } from './browser.ts';
import { REPO, makeSite, runDirOf, squeueIds, type Site } from './harness.ts';

// `report` draws with the real pipeline's environment, not the stand-in on PYTHONPATH.
const PIPELINE_PYTHON = join(REPO, 'python', '.venv', 'bin', 'python');

function spec(name: string, extra: string[] = [], stage: string[] = []): string {
  return [
    `name: ${name}`,
    'cluster: local',
    'environment: cpu-local',
    'stages:',
    '  - id: ae',
    '    stage: autoencoder',
    '    model: vgae',
    '    scale: small',
    '    dataset: synth',
    '    overrides: { training.max_epochs: 2 }',
    '    resources: { cpus: 2, memGB: 4, gpus: { count: 1 }, time: "0:30:00", partition: gpu, arrayConcurrency: 2 }',
    ...stage,
    ...extra,
    '',
  ].join('\n');
}

describe('cost, job records, sizes from history and the run report on SLURM', () => {
  let site: Site;
  let reportEnv: NodeJS.ProcessEnv;

  beforeAll(() => {
    site = makeSite();
    // A stand-in nvidia-smi (no GPU here): the sampler's timestamped CSV rows, and a snapshot.
    const bin = join(site.root, 'bin');
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'nvidia-smi'),
      [
        '#!/bin/bash',
        'if [[ $# -eq 0 ]]; then echo "stand-in nvidia-smi"; exit 0; fi',
        'echo "timestamp, utilization.gpu [%], utilization.memory [%], memory.used [MiB], memory.total [MiB]"',
        'u=(5 60 85 90 40)',
        'for ((i = 0; ; i++)); do printf "%s, %d %%, 10 %%, %d MiB, 16384 MiB\\n" "$(date "+%Y/%m/%d %H:%M:%S.000")" "${u[i % 5]}" $((500 + i)); sleep 0.4; done',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    // The site's balance command (OSC: OSCusage), in a format like OSC's.
    writeFileSync(
      join(bin, 'OSCusage'),
      '#!/bin/bash\necho "Usage for project $2"\necho "  Remaining balance: \\$1,234.50"\n',
      { mode: 0o755 },
    );
    site.env['PATH'] = `${bin}:${site.env['PATH']}`;
    reportEnv = { ...site.env, HPC_PYTHON: PIPELINE_PYTHON, PYTHONPATH: '' };
  });

  it('a run leaves job records; a second plan sizes the requests from them; --right-size applies them', async () => {
    const file = site.spec('hist', spec('e2e-hist'));
    const first = await site.cli(['plan', ...site.specArgs(file)]);
    expect(first.code, first.err).toBe(0);
    expect(first.out).toMatch(/cost \(local; local test cluster/);
    // 2 cpus + 4 GB on a node of 64 cores / 256 GB: 2 billed cores, 1 GPU, 30 minutes.
    expect(first.out).toMatch(/ae: 1 task\(s\) x 2 billed core\(s\) \+ 1 GPU\(s\) on gpu; worst \(to the time limit\) 0\.5000 GPU-h, 1\.00 core-h, 6\.00 SU/);
    expect(first.out).toContain('ae: no history for this stage: the spec is kept');
    expect(first.out).toMatch(/balance: unknown \(cluster local names no balance command\)/);

    const run = await site.cli(['train', ...site.specArgs(file), '--wait']);
    expect(run.code, `${run.out}\n${run.err}`).toBe(0);
    const runDir = runDirOf(run.out);
    const m = readManifest(runDir);
    expect(m.cost?.unit).toBe('SU');
    const [task] = tasksOfRun(m);
    const records = parseJobRecords(readFileSync(join(task!.dir, 'job_record.jsonl'), 'utf8'));
    expect(records).toHaveLength(1);
    const rec = records[0]!;
    expect(rec).toMatchObject({
      jobId: m.jobs[0]!.jobId,
      stageId: 'ae',
      stage: 'autoencoder',
      state: 'COMPLETED',
      exitStatus: 0,
      requested: { cpus: 2, memGB: 4, gpus: 1, timeSeconds: 1800, partition: 'gpu' },
      signalled: false,
      timeLimitHit: false,
    });
    expect(rec.used.cpuSeconds).toBeGreaterThan(0);
    expect(rec.used.peakRssMB).toBeGreaterThan(0);
    expect(rec.gpu?.samples).toBeGreaterThan(0);
    expect(rec.elapsedSeconds).toBeGreaterThanOrEqual(2);
    const history = readFileSync(join(task!.dir, 'history.csv'), 'utf8').trim().split('\n');
    expect(history).toHaveLength(3); // header + 2 epochs
    const samples = readFileSync(join(task!.dir, 'gpu_samples.csv'), 'utf8');
    expect(samples).toMatch(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d\.\d+, \d+ %/m);

    const second = await site.cli(['plan', ...site.specArgs(file)]);
    expect(second.code, second.err).toBe(0);
    expect(second.out).toMatch(/ae: from 1 finished task\(s\) of 1 run\(s\) \(apply with train --right-size\)/);
    expect(second.out).toMatch(/memGB: 4 -> 1 +\(peak RSS p95/);
    expect(second.out).toMatch(/cpus: 2 -> 1 /);
    // 30 minutes down to the elapsed time x 1.25 plus the 300 s requeue lead, in 5-minute steps.
    expect(second.out).toMatch(/time: 0:30:00 -> 00:10:00 /);
    expect(second.out).toMatch(/expected \d+\.\d+ GPU-h/);
    const estimate = /total: worst ([\d.]+) GPU-h, ([\d.]+) core-h, ([\d.]+) SU; expected ([\d.]+) GPU-h, ([\d.]+) core-h, ([\d.]+) SU/.exec(second.out)!;
    console.log(
      `[figures] first run: requested 2 cpus / 4 GB / 1800 s; used ${rec.used.meanCpus} cores busy, ${rec.used.peakRssMB} MB peak RSS (${rec.used.peakRssSource}), ${rec.elapsedSeconds} s; ` +
        `estimate before it: worst 0.5 GPU-h / 6 SU; second plan: worst ${estimate[1]} GPU-h / ${estimate[3]} SU, expected ${estimate[4]} GPU-h / ${estimate[6]} SU`,
    );

    const sized = await site.cli(['train', ...site.specArgs(file), '--right-size', '--wait', '--force']);
    expect(sized.code, `${sized.out}\n${sized.err}`).toBe(0);
    expect(sized.out).toContain('(applied: --right-size)');
    const m2 = readManifest(runDirOf(sized.out));
    expect(m2.rightSized?.['ae']).toMatchObject({ cpus: 1, memGB: 1, time: '00:10:00', tasks: 1, runs: 1 });
    const script = readFileSync(join(m2.runDir, m2.jobs[0]!.script), 'utf8');
    expect(script).toMatch(/^#SBATCH --mem=1G$/m);
    expect(script).toMatch(/^#SBATCH --time=00:10:00$/m);

    // The run report of the first run, drawn by the pipeline's environment.
    const report = await site.cli(['report', runDir], { env: reportEnv });
    expect(report.code, `${report.out}\n${report.err}`).toBe(0);
    expect(report.out).toMatch(/MEMORY_OVER_REQUESTED: ae: peak memory/);
    const dir = join(runDir, 'report');
    for (const png of ['ae-curves.png', 'ae-throughput.png', 'ae-gpu.png', 'ae-memory.png'])
      expect(statSync(join(dir, png)).size, png).toBeGreaterThan(1000);
    const page = await checkPage(pathToFileURL(join(dir, 'report.html')).href);
    expect(page.title).toContain('e2e-hist');
    expect(page.consoleErrors).toEqual([]);
    expect(page.exceptions).toEqual([]);
    expect(page.requests.filter((u) => !u.startsWith('file://'))).toEqual([]);
    expect(page.images.length).toBe(4);
    expect(page.images.filter((i) => !i.ok)).toEqual([]);
    expect(page.screenshot.length).toBeGreaterThan(10_000);
  });

  it('refuses a plan over its budget with the figures, before anything is rendered or queued', async () => {
    const file = site.spec('budget', spec('e2e-budget', ['budget: { maxBillingUnits: 1 }']));
    const before = squeueIds();
    const r = await site.cli(['train', ...site.specArgs(file)]);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/the plan's worst case, 6\.00 SU, is over budget\.maxBillingUnits = 1 SU; nothing was queued/);
    expect(r.err).toMatch(/ae: 1 task\(s\) x 2 billed core\(s\)/);
    expect(r.err).toMatch(/to fit: shorter resources\.time/);
    expect(squeueIds()).toEqual(before);
    expect(existsSync(join(site.runsDir, 'e2e-budget'))).toBe(false);
    const ok = await site.cli(['plan', ...site.specArgs(site.spec('budget-ok', spec('e2e-budget-ok', ['budget: { maxBillingUnits: 10 }'])))]);
    expect(ok.code, ok.err).toBe(0);
    expect(ok.out).toContain('budget: worst case 6.00 SU is within 10 SU');
  });

  it("reads the account's balance with the site command the cluster profile names", async () => {
    const profile = { ...clusterPresets.local, balance: { argv: ['OSCusage', '-P', 'PAS1266'], pattern: clusterPresets['osc-pitzer'].balance!.pattern, unit: 'SU' } };
    writeFileSync(join(site.root, 'cluster-with-balance.yaml'), JSON.stringify(profile));
    const file = site.spec('balance', spec('e2e-balance').replace('cluster: local', `cluster: ${join(site.root, 'cluster-with-balance.yaml')}`));
    const r = await site.cli(['plan', ...site.specArgs(file)]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('balance: 1234.5 SU (from `OSCusage -P PAS1266`)');
  });

  it('reports a 12-point sweep: the metric per point and the best point; the catalogue has one row per task', async () => {
    // Its jobs run in this checkout's python/.venv: the stand-in's rows are the real catalogue's (pyarrow).
    const sweepSite = makeSite({ pipelineVenv: true });
    sweepSite.env['PATH'] = site.env['PATH'];
    const env = { ...sweepSite.env, HPC_PYTHON: PIPELINE_PYTHON, PYTHONPATH: '' };
    const file = sweepSite.spec(
      'sweep12',
      spec('e2e-sweep12', ['sweep:', '  grid:', '    training.lr: [0.1, 0.05, 0.01, 0.005]', '    training.batch_size: [16, 32, 64]'])
        // One core, no GPU, every task at once: they finish together as far as the node's cores allow.
        .replace('cpus: 2, memGB: 4, gpus: { count: 1 }', 'cpus: 1, memGB: 1, gpus: { count: 0 }')
        .replace('arrayConcurrency: 2', 'arrayConcurrency: 12'),
    );
    const r = await sweepSite.cli(['train', ...sweepSite.specArgs(file), '--wait']);
    expect(r.code, `${r.out}\n${r.err}`).toBe(0);
    const runDir = runDirOf(r.out);
    const t0 = performance.now();
    const report = await sweepSite.cli(['report', runDir], { env });
    const seconds = (performance.now() - t0) / 1000;
    expect(report.code, `${report.out}\n${report.err}`).toBe(0);
    console.log(`[figures] report on a 12-point sweep: ${seconds.toFixed(1)} s (${report.out.split('\n')[0]})`);
    // The stand-in's F1 is 0.9 - lr: the best point is the smallest lr.
    expect(report.out).toMatch(/best point of ae: #\d+ \(training\.lr=0\.005, training\.batch_size=\d+\): f1 = 0\.895/);
    expect(report.out).toContain(`in the catalogue: 12 row(s) of this run in ${join(sweepSite.runsDir, 'catalogue')}`);

    // The catalogue: exactly one row per array task, however many finished at once.
    const m = readManifest(runDir);
    const where = `run_id=${basename(runDir)}`;
    const runs = await sweepSite.cli(['runs', '--stack-outputs', sweepSite.stackFile, '--json', '--where', where], { env });
    expect(runs.code, runs.err).toBe(0);
    const rows = JSON.parse(runs.out) as Record<string, unknown>[];
    expect(rows).toHaveLength(12);
    expect(rows.map((x) => Number(x['point_index'])).sort((a, b) => a - b)).toEqual([...Array(12).keys()]);
    expect(new Set(rows.map((x) => x['row_key'])).size).toBe(12);
    const arrayJob = m.jobs[0]!.jobId;
    for (const row of rows) {
      const point = JSON.parse(String(row['point'])) as Record<string, number>;
      expect(row).toMatchObject({ experiment: 'e2e-sweep12', stage_id: 'ae', state: 'COMPLETED', recorded_by: 'pipeline' });
      expect(row).toMatchObject({ spec_hash: m.spec.hash, environment: 'cpu-local', cost_unit: 'SU' });
      expect(row['f1']).toBeCloseTo(0.9 - point['training.lr']!, 6);
      const index = String(row['point_index']);
      expect(row['slurm_job_id']).toBe(`${arrayJob}_${index}`);
      expect(row['stage_dir']).toBe(join(runDir, 'outputs', `point_${index}`, 'synth', 'vgae_small_autoencoder'));
    }
    expect(readdirSync(join(sweepSite.runsDir, 'catalogue')).filter((f) => !f.endsWith('.parquet'))).toEqual([]);
    // How many tasks ran at once (their job records' start and end), for the note.
    const spans = tasksOfRun(m).flatMap((t) =>
      parseJobRecords(readFileSync(join(t.dir, 'job_record.jsonl'), 'utf8')).map((x) => [x.start ?? 0, x.end] as const),
    );
    const most = Math.max(...spans.map(([s]) => spans.filter(([a, b]) => a <= s && s < b).length));
    console.log(`[figures] 12-point sweep: 12 catalogue rows; at most ${most} task(s) ran at once on this node`);
    const dir = join(runDir, 'report');
    expect(statSync(join(dir, 'ae-sweep.png')).size).toBeGreaterThan(1000);
    const html = readFileSync(join(dir, 'report.html'), 'utf8');
    expect(html).toContain('best point');
    expect(html).not.toMatch(/(src|href)=['"]https?:/);
    expect(readdirSync(dir).filter((f) => f.endsWith('.png')).length).toBeGreaterThanOrEqual(5);
  });
});

