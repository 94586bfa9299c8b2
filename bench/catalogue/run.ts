// bench/catalogue: the catalogue of all runs at lab scale, measured in one run.
//
//   writing   rows/s of `write_row` one row at a time (as finished stages write them): one file per
//             row (before) vs compaction as rows accumulate (the writers' default now), interleaved;
//   query     `python -m <the default pipeline> runs` (what `runner runs` runs) on 1k, 10k and 100k
//             rows: a run's rows (`--where run_id=…`, small output) and the leaderboard
//             (`--where state=COMPLETED --sort f1:desc`, every completed row printed), on the folder
//             as one file per row (before compaction), as the writers leave it (compacted as rows
//             accumulate) and after `catalogue-compact` (one file);
//   runner    `kdgat-runner runs` end to end (Node, stack outputs file, the query) on 100k rows;
//   copy      what `runner runs` over SSH does first: `pullCatalogue`, the rsync of the site's folder
//             into the local copy (here through a local session: the same rsync, no network), into an
//             empty copy and again with nothing new.
// Variants interleave within each repeat (the order alternates); prints median, min and max of --reps
// repeats, and each variant's ratio to one file per row.
//
//   node bench/catalogue/run.ts [--reps 5] [--sizes 1000,10000,100000] [--write-rows 1000] [--catalogues DIR]
//   (through scripts/with-toolchain.sh; the machine otherwise quiet: it writes ~220k rows)
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { SITE_HELPER_MODULE } from '@kdgat/config';
import { sampleOutputs } from '@kdgat/planning/testing';
import type { StackOutputs } from '@kdgat/planning';
import { pullCatalogue } from '../../libs/run-record/src/catalogue.ts';
import { SiteFiles, localExecutor } from '../../libs/transport/src/index.ts';

const REPO = resolve(import.meta.dirname, '../..');
const PYTHON = join(REPO, 'python', '.venv', 'bin', 'python');
const ROWS_PY = join(REPO, 'bench', 'catalogue', 'rows.py');
const RUNNER = join(REPO, 'apps', 'runner', 'bin', 'kdgat-runner.js');
const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '5' },
    sizes: { type: 'string', default: '1000,10000,100000' },
    'write-rows': { type: 'string', default: '1000' },
    // Build the catalogues here, or reuse those an earlier run built here (they are not removed).
    catalogues: { type: 'string' },
    // Leave out the folder as one file per row in the query, runner and copy figures (a quick rerun
    // of the compacted ones; no baseline then).
    'compacted-only': { type: 'boolean', default: false },
  },
});
const reps = Number(values.reps);
const sizes = values.sizes.split(',').map(Number);
const writeRows = Number(values['write-rows']);
if (!Number.isInteger(reps) || reps < 1) throw new Error(`--reps ${values.reps}: a whole number >= 1`);
if (
  sizes.some((n) => !Number.isInteger(n) || n < 100) ||
  sizes.join() !== [...sizes].sort((a, b) => a - b).join()
)
  throw new Error(`--sizes ${values.sizes}: whole numbers >= 100, ascending`);

const root = mkdtempSync(join(tmpdir(), 'kdgat-bench-catalogue-'));
const env = { ...process.env, PYTHONPATH: '' };

function python(args: string[]): string {
  const r = spawnSync(PYTHON, args, { encoding: 'utf8', env, maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`python ${args.join(' ')} failed (${r.status}):\n${r.stderr}`);
  return r.stdout;
}

/** Writes `rows` rows (keys from `start` on) into `dir`; the loop's own seconds. */
function write(
  dir: string,
  rows: number,
  start: number,
  compact: boolean,
): { seconds: number; files: number } {
  const out = python([
    ROWS_PY,
    dir,
    '--rows',
    String(rows),
    '--start',
    String(start),
    ...(compact ? [] : ['--no-compact']),
  ]);
  return JSON.parse(out) as { seconds: number; files: number };
}

function timed(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return (performance.now() - t0) / 1000;
}

async function timedAsync(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return (performance.now() - t0) / 1000;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const fmt = (s: number) => (s >= 10 ? s.toFixed(1) : s >= 1 ? s.toFixed(2) : s.toFixed(3));
const stats = (xs: number[]) => `${fmt(median(xs))} s [${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}]`;

/** Runs each variant once per repeat, the order alternating; returns the times per variant. */
async function interleaved(
  variants: Record<string, () => number | Promise<number>>,
): Promise<Record<string, number[]>> {
  const names = Object.keys(variants);
  const out: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < reps; r++)
    for (const n of r % 2 ? [...names].reverse() : names) out[n]!.push(await variants[n]!());
  return out;
}

const machine = spawnSync('sh', ['-c', 'nproc; uptime'], { encoding: 'utf8' })
  .stdout.trim()
  .replace(/\n/, ' cores; ');
console.log(`bench/catalogue: ${reps} repeats, sizes ${sizes.join(', ')}; ${machine}; in ${root}`);

// --- writing -----------------------------------------------------------------------------------
{
  let k = 0;
  const rate = (compact: boolean) => () => {
    const dir = join(root, 'w', `${k++}`);
    const { seconds } = write(dir, writeRows, 0, compact);
    rmSync(dir, { recursive: true, force: true });
    return seconds;
  };
  const t = await interleaved({
    'one file per row': rate(false),
    'compaction as rows accumulate': rate(true),
  });
  console.log(
    `\nwriting ${writeRows} rows, one at a time (rows/s: median [min–max]; time ratio to one file per row)`,
  );
  const base = median(t['one file per row']!);
  for (const [name, xs] of Object.entries(t)) {
    const r = xs.map((s) => writeRows / s);
    console.log(
      `  ${name.padEnd(32)} ${median(r).toFixed(0)} rows/s [${Math.min(...r).toFixed(0)}–${Math.max(...r).toFixed(0)}]  ${(median(xs) / base).toFixed(2)}×`,
    );
  }
}

// --- the catalogues: each size as one file per row, as the writers leave it, and compacted -------
type State = 'one file per row' | 'as the writers leave it' | 'after catalogue-compact';
const ALL_STATES: State[] = ['one file per row', 'as the writers leave it', 'after catalogue-compact'];
const STATES = ALL_STATES.filter((s) => !(values['compacted-only'] && s === 'one file per row'));
const folders = new Map<string, string>(); // `${state}@${size}` -> folder
const CODE: Record<State, string> = {
  'one file per row': 'l',
  'as the writers leave it': 'c',
  'after catalogue-compact': 'f',
};
const built = values.catalogues ? resolve(values.catalogues) : join(root, 'cat');
const reuse = sizes.every((n) => ALL_STATES.every((s) => existsSync(join(built, `${CODE[s]}-${n}`))));
if (reuse) {
  for (const n of sizes) for (const s of ALL_STATES) folders.set(`${s}@${n}`, join(built, `${CODE[s]}-${n}`));
  console.log(`\nthe catalogues: those an earlier run built in ${built} (its build figures are that run's)`);
} else {
  mkdirSync(built, { recursive: true });
  console.log('\nbuilding the catalogues (rows/s of the whole build, one process)');
  for (const [state, compact] of [
    ['one file per row', false],
    ['as the writers leave it', true],
  ] as const) {
    const growing = join(root, 'grow', compact ? 'c' : 'l');
    let written = 0;
    let seconds = 0;
    let files = 0;
    for (const n of sizes) {
      const w = write(growing, n - written, written, compact);
      seconds += w.seconds;
      files = w.files;
      written = n;
      const dir = join(built, `${compact ? 'c' : 'l'}-${n}`);
      cpSync(growing, dir, { recursive: true });
      folders.set(`${state}@${n}`, dir);
      console.log(
        `  ${state.padEnd(24)} ${String(n).padStart(7)} rows: ${files} files, ${(written / seconds).toFixed(0)} rows/s`,
      );
    }
    rmSync(growing, { recursive: true, force: true });
  }
  for (const n of sizes) {
    const dir = join(built, `f-${n}`);
    cpSync(folders.get(`as the writers leave it@${n}`)!, dir, { recursive: true });
    const runs = join(root, 'compact-root', String(n));
    mkdirSync(runs, { recursive: true });
    symlinkSync(dir, join(runs, 'catalogue'));
    python(['-m', SITE_HELPER_MODULE, 'catalogue-compact', '--runs-root', runs]);
    folders.set(`after catalogue-compact@${n}`, dir);
  }
  for (const [key, dir] of folders)
    if (key.startsWith('after'))
      console.log(
        `  ${key.replace('@', ' ').padEnd(32)}: ${readdirSync(dir).filter((f) => f.endsWith('.parquet')).length} file(s)`,
      );
}

// --- the query -----------------------------------------------------------------------------------
const RUN = '20260101T050000Z-ac3478d6'; // rows.py's run 5: 100 rows (25 points x 4 stages)
const QUERIES = {
  "a run's rows": ['--where', `run_id=${RUN}`],
  leaderboard: ['--where', 'state=COMPLETED', '--sort', 'f1:desc'],
} as const;
const query = (dir: string, args: readonly string[]) => () =>
  timed(() => python(['-m', SITE_HELPER_MODULE, 'runs', '--catalogue', dir, ...args]));
const results: { what: string; state: State; size: number; xs: number[] }[] = [];
for (const n of sizes)
  for (const [what, args] of Object.entries(QUERIES)) {
    // The leaderboard on 100k one-row files is left out: its read alone is the run's-rows query's.
    const states = STATES.filter(
      (s) => !(what === 'leaderboard' && s === 'one file per row' && n >= 100_000),
    );
    const t = await interleaved(
      Object.fromEntries(states.map((s) => [s, query(folders.get(`${s}@${n}`)!, args)])),
    );
    for (const s of states) results.push({ what, state: s, size: n, xs: t[s]! });
    console.error(`  (query ${what} at ${n} rows done)`);
  }
console.log(
  `\nquery: python -m ${SITE_HELPER_MODULE} runs --catalogue DIR … (process start to exit; median [min–max]; ratio to one file per row)`,
);
for (const [what] of Object.entries(QUERIES)) {
  console.log(`  ${what}`);
  for (const n of sizes) {
    const base = results.find((r) => r.what === what && r.size === n && r.state === 'one file per row');
    for (const r of results.filter((x) => x.what === what && x.size === n))
      console.log(
        `    ${String(n).padStart(7)} rows  ${r.state.padEnd(24)} ${stats(r.xs).padEnd(26)} ${!base ? '' : r === base ? 'baseline' : `${(median(base.xs) / median(r.xs)).toFixed(1)}× faster`}`,
      );
  }
}

// --- the runner end to end, on the largest size ------------------------------------------------
{
  const n = sizes[sizes.length - 1]!;
  const variants: Record<string, () => number | Promise<number>> = {};
  for (const s of STATES.filter((x) => x !== 'one file per row' || n < 100_000)) {
    const runsDir = join(root, 'stack', s.replace(/\W+/g, '-'));
    mkdirSync(runsDir, { recursive: true });
    symlinkSync(folders.get(`${s}@${n}`)!, join(runsDir, 'catalogue'));
    const outputs: StackOutputs = {
      ...sampleOutputs,
      scratch: { ...sampleOutputs.scratch, root: runsDir, runsDir },
    };
    const file = join(runsDir, 'outputs.json');
    writeFileSync(file, JSON.stringify(outputs));
    variants[s] = () =>
      timed(() => {
        const r = spawnSync('node', [RUNNER, 'runs', '--stack-outputs', file, '--where', `run_id=${RUN}`], {
          encoding: 'utf8',
          env: { ...env, HPC_PYTHON: PYTHON },
          maxBuffer: 1 << 30,
        });
        if (r.status !== 0) throw new Error(`kdgat-runner runs failed (${r.status}):\n${r.stderr}`);
      });
  }
  const t = await interleaved(variants);
  console.log(
    `\nrunner: kdgat-runner runs --stack-outputs F --where run_id=… on ${n} rows (a local stack, end to end)`,
  );
  for (const [s, xs] of Object.entries(t)) console.log(`  ${s.padEnd(24)} ${stats(xs)}`);
}

// --- the copy a site's catalogue comes back as -------------------------------------------------
{
  const files = new SiteFiles(localExecutor());
  console.log(
    '\ncopy: pullCatalogue (rsync through a local session, no network) into an empty copy, then again with nothing new',
  );
  for (const n of sizes) {
    const variants: Record<string, () => number | Promise<number>> = {};
    const again: Record<string, number[]> = {};
    let k = 0;
    for (const s of STATES.filter((x) => x !== 'after catalogue-compact')) {
      const site = join(root, 'site', `${s.replace(/\W+/g, '-')}-${n}`);
      mkdirSync(site, { recursive: true });
      symlinkSync(folders.get(`${s}@${n}`)!, join(site, 'catalogue'));
      again[s] = [];
      variants[s] = async () => {
        const local = join(root, 'copies', `${k++}`, 'catalogue');
        const pull = async () => {
          const r = await pullCatalogue(files, site, local);
          if (r.error) throw new Error(`pullCatalogue: ${r.error}`);
        };
        const first = await timedAsync(pull);
        again[s]!.push(await timedAsync(pull));
        rmSync(join(local, '..'), { recursive: true, force: true });
        return first;
      };
    }
    const t = await interleaved(variants);
    for (const s of Object.keys(variants))
      console.log(
        `  ${String(n).padStart(7)} rows  ${s.padEnd(24)} first ${stats(t[s]!).padEnd(26)} nothing new ${stats(again[s]!)}`,
      );
  }
}
rmSync(root, { recursive: true, force: true });
