// bench/preprocess/array.ts: a preprocess stage over the twenty real recordings as a job array of
// shard tasks across the box's nodes (`shards: N`, then the join), against the same stage as one
// job, on the cluster in the box (scripts/site/site.sh: two nodes in `gpu`, each 2 CPUs, sharing
// this machine's cores). Each variant is one `kdgat-runner train --wait` from the laptop, timed
// end to end; its makespan on the cluster (first task start to last task end, sacct) is printed too.
// Both build the cache from nothing every time: the caches (and the shard store) are removed
// between rounds, untimed. Variants interleave (A B, then B A, …), each repeated --reps times;
// prints median, min and max, and the ratios of the medians.
//
//   node bench/preprocess/array.ts [--reps 5] [--shards 4]     (root: the site needs namespaces)
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { SCRATCH, startSite, writeBoxProfile, type SshSite } from '../../apps/runner/test/site/site.ts';

const REPO = resolve(import.meta.dirname, '../..');
const { values } = parseArgs({
  options: { reps: { type: 'string', default: '5' }, shards: { type: 'string', default: '4' } },
});
const reps = Number(values.reps);
const shards = Number(values.shards);
if (!Number.isInteger(reps) || reps < 1)
  throw new Error(`--reps ${values.reps}: expected a whole number >= 1`);
if (!Number.isInteger(shards) || shards < 2)
  throw new Error(`--shards ${values.shards}: expected a whole number >= 2`);

// The recordings are not in the repository: twenty public CAN recordings (the HCRL "Survival
// Analysis" data set as repackaged by the can-train-and-test collection, and can-train-and-test
// set_01 and set_03), converted to Parquet; development machines keep them in ../shared/data/can-real
// (its README lists each file, its rows and attack rows).
const DATA = [join(REPO, '../shared/data/can-real'), join(REPO, '../../shared/data/can-real')].find((d) => {
  try {
    return readdirSync(d).some((f) => f.endsWith('.parquet'));
  } catch {
    return false;
  }
});
if (!DATA) throw new Error('no recordings at ../shared/data/can-real (the twenty real CAN recordings)');
const recordings = readdirSync(DATA).filter((f) => f.endsWith('.parquet'));

/** The stage both variants run: data sets the site's stack declares (apps/runner/test/site/site.ts). */
const VARIANTS = {
  array: { dataset: 'shardset', cpus: 1, shards },
  oneJob: { dataset: 'shardref', cpus: 2, shards: undefined },
} as const;
type Variant = keyof typeof VARIANTS;

function specFile(site: SshSite, v: Variant): string {
  const { dataset, cpus, shards: n } = VARIANTS[v];
  const file = join(site.dir, 'laptop', `bench-preprocess-${v}.yaml`);
  writeFileSync(
    file,
    [
      `name: bench-preprocess-${v}`,
      'cluster: box-cluster.yaml',
      'environment: cpu-local',
      'requeue: { enabled: false }',
      'stages:',
      '  - id: preprocess',
      '    stage: preprocess',
      '    model: gat',
      '    scale: small',
      `    dataset: ${dataset}`,
      ...(n ? [`    shards: ${n}`] : []),
      `    resources: { cpus: ${cpus}, memGB: 2, gpus: { count: 0 }, partition: gpu, arrayConcurrency: ${n ?? 1}, time: "0:30:00" }`,
      '',
    ].join('\n'),
  );
  return file;
}

/** sacct's first start and last end of a job's tasks (the makespan on the cluster), in seconds. */
async function makespan(site: SshSite, jobIds: string[]): Promise<number> {
  const r = await site.ssh(`sacct -n -P -X -j ${jobIds.join(',')} -o Start,End`);
  if (r.code !== 0) throw new Error(`sacct failed: ${r.err}`);
  const rows = r.out
    .trim()
    .split('\n')
    .map((l) => l.split('|').map((t) => Date.parse(t)));
  const starts = rows.map((x) => x[0]!).filter(Number.isFinite);
  const ends = rows.map((x) => x[1]!).filter(Number.isFinite);
  return (Math.max(...ends) - Math.min(...starts)) / 1000;
}

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  return { median: mid, min: s[0]!, max: s.at(-1)! };
};

let site: SshSite | undefined;
try {
  console.log(`bench preprocess array: starting the site, ${recordings.length} recordings from ${DATA} …`);
  site = await startSite();
  const up = await site.pulumi('up', ['--summary']);
  if (up.code !== 0) throw new Error(`infra:up of the site failed:\n${up.out}${up.err}`);
  writeBoxProfile(site);
  for (const { dataset } of Object.values(VARIANTS)) {
    const raw = site.onSite(`/fs/ess/data/raw/${dataset}`);
    mkdirSync(raw, { recursive: true });
    for (const f of recordings) cpSync(join(DATA, f), join(raw, f));
  }
  const wall: Record<Variant, number[]> = { array: [], oneJob: [] };
  const cluster: Record<Variant, number[]> = { array: [], oneJob: [] };
  let messages = 0;
  for (let rep = 0; rep < reps; rep++) {
    const order: Variant[] = rep % 2 === 0 ? ['array', 'oneJob'] : ['oneJob', 'array'];
    for (const v of order) {
      const cache = site.onSite(`${SCRATCH}/cache/${VARIANTS[v].dataset}`);
      for (const f of readdirSync(cache)) rmSync(join(cache, f), { recursive: true, force: true });
      const t0 = performance.now();
      const r = await site.runner([
        'train',
        '--spec',
        specFile(site, v),
        '--stack',
        site.stack,
        '--scheduler',
        'slurm',
        '--wait',
      ]);
      wall[v].push((performance.now() - t0) / 1000);
      if (r.code !== 0) throw new Error(`the ${v} run failed:\n${r.out.slice(-3000)}${r.err.slice(-3000)}`);
      const local = /^run dir: \S+ on the site; local copy: (\S+)$/m.exec(r.out)?.[1];
      if (!local) throw new Error(`no run dir in:\n${r.out}`);
      const manifest = JSON.parse(readFileSync(join(local, 'manifest.json'), 'utf8')) as {
        jobs: { jobId: string }[];
      };
      cluster[v].push(
        await makespan(
          site,
          manifest.jobs.map((j) => j.jobId),
        ),
      );
      messages = (JSON.parse(readFileSync(join(cache, 'meta.json'), 'utf8')) as { messages: number })
        .messages;
    }
    console.log(
      `  round ${rep + 1}/${reps}: array wall ${wall.array.at(-1)!.toFixed(1)} s (cluster ${cluster.array.at(-1)!.toFixed(1)} s), ` +
        `one job wall ${wall.oneJob.at(-1)!.toFixed(1)} s (cluster ${cluster.oneJob.at(-1)!.toFixed(1)} s)`,
    );
  }
  console.log('');
  console.log(
    `preprocess of ${recordings.length} recordings (${messages} messages), ${reps} rounds interleaved, seconds:`,
  );
  console.log('  variant                                  what              median      min      max');
  for (const [v, label] of [
    ['array', `array of ${shards} shard tasks (1 CPU) + join`],
    ['oneJob', 'one job, 2 CPUs (2 workers)'],
  ] as const) {
    for (const [what, xs] of [
      ['runner --wait', wall[v]],
      ['cluster makespan', cluster[v]],
    ] as const) {
      const s = stats(xs);
      console.log(
        `  ${label.padEnd(40)} ${what.padEnd(16)} ${s.median.toFixed(1).padStart(7)} ${s.min.toFixed(1).padStart(8)} ${s.max.toFixed(1).padStart(8)}`,
      );
    }
  }
  console.log(
    `  ratio array / one job (medians): runner --wait ${(stats(wall.array).median / stats(wall.oneJob).median).toFixed(2)}, ` +
      `cluster makespan ${(stats(cluster.array).median / stats(cluster.oneJob).median).toFixed(2)}`,
  );
} finally {
  site?.stop();
}
