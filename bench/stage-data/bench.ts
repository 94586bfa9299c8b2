/**
 * bench/stage-data: P0 staging (stage_data.sh) vs the original proposal's plain `cp` loop.
 *
 * Generates a cache shaped like real ones (a few large .pt files, small .pkl/.json) under
 * $HPC_BENCH_DIR, then times, with page caches dropped before each run when permitted (root):
 *   baseline      the original proposal: for ds; do cp -r "$SRC/$ds"/* "$TMPDIR/cache/$ds/" 2>/dev/null || true; done
 *   ours -j1      stage_data.sh with one copy at a time (verification and atomic rename included)
 *   ours          stage_data.sh with HPC_STAGE_JOBS parallel copies (default 4)
 *   re-stage      stage_data.sh again on a staged cache (what a requeued job pays), vs baseline again
 * Prints seconds, MB/s and ratios against the baseline measured in the same run.
 *
 * Env: HPC_BENCH_SCALE (default 0.5: 1.3 GB; 1 = 2.65 GB as in the original proposal), HPC_BENCH_REPEATS (3),
 *      HPC_BENCH_DIR (/tmp/kdgat-bench-stage), HPC_STAGE_JOBS (4).
 * Run: node bench/stage-data/bench.ts
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { renderStageData } from '@kdgat/slurm-templates';

const scale = Number(process.env.HPC_BENCH_SCALE ?? '0.5');
const repeats = Number(process.env.HPC_BENCH_REPEATS ?? '3');
const jobs = process.env.HPC_STAGE_JOBS ?? '4';
const root = process.env.HPC_BENCH_DIR ?? '/tmp/kdgat-bench-stage';
const MB = 1024 * 1024;

// Sizes in MB at scale 1, after the caches the original proposal describes (100 MB - 1.4 GB .pt files).
const shape: Record<string, Record<string, number>> = {
  hcrl_sa: { 'train_graphs.pt': 1400, 'val_graphs.pt': 400, 'test_graphs.pt': 100 },
  set_01: { 'train_graphs.pt': 600, 'test_graphs.pt': 150 },
};
const small: Record<string, number> = {
  'id_vocab.pkl': 0.2,
  'norm_stats.pkl': 0.05,
  'cache_meta.json': 0.002,
};

const src = join(root, 'scratch-cache');
const tmp = join(root, 'local-tmp');
const script = join(root, 'stage_data.sh');

function generate(): number {
  rmSync(root, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  writeFileSync(script, renderStageData({ parallelCopies: Number(jobs) }));
  // Incompressible, non-sparse content: a random 8 MB block written repeatedly with a per-chunk stamp.
  const block = randomBytes(8 * MB);
  let total = 0;
  for (const [ds, files] of Object.entries(shape)) {
    mkdirSync(join(src, ds), { recursive: true });
    for (const [name, sizeMB] of Object.entries({ ...files, ...small })) {
      const bytes = Math.max(1, Math.round(sizeMB * scale * MB));
      const fd = openSync(join(src, ds, name), 'w');
      for (let off = 0, i = 0; off < bytes; off += block.length, i++) {
        block.writeUInt32LE(i, 0);
        writeSync(fd, block, 0, Math.min(block.length, bytes - off));
      }
      closeSync(fd);
      total += bytes;
    }
  }
  execFileSync('sync');
  return total;
}

let dropNote = 'page cache dropped before each run';
function dropCaches(): void {
  execFileSync('sync');
  try {
    writeFileSync('/proc/sys/vm/drop_caches', '3');
  } catch {
    dropNote = 'page cache NOT dropped (needs root): reads may come from memory';
  }
}

function timed(label: string, command: string, env: Record<string, string>, clearDest: boolean): number {
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) {
    if (clearDest) {
      rmSync(tmp, { recursive: true, force: true });
      mkdirSync(tmp);
    }
    dropCaches();
    const t0 = process.hrtime.bigint();
    const r = spawnSync('bash', ['-c', command], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: tmp, SRC: src, SCRIPT: script, ...env },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    execFileSync('sync'); // count the write-back, as a job would before reading
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    if (r.status !== 0) throw new Error(`${label} failed (${r.status}): ${r.stderr}`);
    times.push(secs);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] ?? NaN;
}

const datasets = Object.keys(shape);
const ours = `bash "$SCRIPT" ${datasets.map((d) => `${d} "$SRC/${d}"`).join(' ')} >/dev/null`;
const baseline = `for ds in ${datasets.join(' ')}; do mkdir -p "$TMPDIR/cache/$ds"; cp -r "$SRC/$ds"/* "$TMPDIR/cache/$ds/" 2>/dev/null || true; done`;

const total = generate();
console.log(
  `bench/stage-data: ${(total / 1e6).toFixed(0)} MB in ${datasets.length} datasets (scale ${scale}), median of ${repeats}, ${dropNote}`,
);
console.log(`source ${src}, TMPDIR ${tmp} (same disk here; on a cluster: scratch -> node-local disk)`);

const rows: [string, number, number][] = [];
const tBase = timed('baseline', baseline, {}, true);
rows.push(["baseline: the proposal's cp loop", tBase, total]);
const tSerial = timed('ours -j1', ours, { HPC_STAGE_JOBS: '1' }, true);
rows.push(['stage_data.sh, 1 copy at a time', tSerial, total]);
const tOurs = timed('ours', ours, { HPC_STAGE_JOBS: jobs }, true);
rows.push([`stage_data.sh, ${jobs} parallel copies`, tOurs, total]);
const tBaseAgain = timed('baseline re-stage', baseline, {}, false);
rows.push(["re-stage: the proposal's cp loop again", tBaseAgain, total]);
const tRestage = timed('ours re-stage', ours, { HPC_STAGE_JOBS: jobs }, false);
rows.push(['re-stage: stage_data.sh (verified skip)', tRestage, total]);

console.log('');
console.log(
  `${'scenario'.padEnd(42)} ${'seconds'.padStart(8)} ${'MB/s'.padStart(9)} ${'vs baseline'.padStart(12)}`,
);
for (const [label, secs, bytes] of rows) {
  const ref = label.startsWith('re-stage') ? tBaseAgain : tBase;
  const speedup = ref / secs;
  console.log(
    `${label.padEnd(42)} ${secs.toFixed(2).padStart(8)} ${(bytes / 1e6 / secs).toFixed(0).padStart(9)} ${`${speedup.toFixed(2)}x`.padStart(12)}`,
  );
}
console.log('');
console.log(
  'MB/s = dataset bytes / seconds (for a re-stage: bytes made available per second). Ratio = baseline seconds / seconds.',
);
rmSync(root, { recursive: true, force: true });
