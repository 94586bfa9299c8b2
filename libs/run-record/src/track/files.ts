// Reading what jobs leave behind: their logs (paths from the script's own #SBATCH header)
// and the pipeline's metrics.json files.
import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, statSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import type { ManifestJob } from '../manifest.ts';
import type { TaskStatus } from '@kdgat/schedulers';
import { expandLogPattern } from '@kdgat/schedulers';

/** The log files of one task (stdout and stderr), from the patterns recorded in the manifest. */
export function logPathsOf(
  job: Pick<ManifestJob, 'logs' | 'name'>,
  task: TaskStatus,
): { output: string; error: string } {
  const ids: Parameters<typeof expandLogPattern>[1] = {
    jobId: task.taskJobId ?? task.jobId,
    arrayJobId: task.arrayIndex !== undefined ? task.jobId : undefined,
    arrayIndex: task.arrayIndex,
    name: job.name,
    user: userInfo().username,
    node: hostname(),
  };
  return { output: expandLogPattern(job.logs.output, ids), error: expandLogPattern(job.logs.error, ids) };
}

/** Both logs' tails together (stderr last: tracebacks and SLURM's own messages land there). */
export function tailLogs(job: Pick<ManifestJob, 'logs' | 'name'>, task: TaskStatus, lines: number): string {
  const p = logPathsOf(job, task);
  return [tailFile(p.output, lines), p.error === p.output ? '' : tailFile(p.error, lines)]
    .filter(Boolean)
    .join('\n');
}

/** The last `lines` lines of a file (reads at most the final 64 KiB); '' when absent. */
export function tailFile(path: string, lines = 20): string {
  if (!existsSync(path)) return '';
  const size = statSync(path).size;
  const len = Math.min(size, 64 * 1024);
  const buf = Buffer.alloc(len);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, buf, 0, len, size - len);
  } finally {
    closeSync(fd);
  }
  const all = buf.toString('utf8').split('\n');
  if (all.at(-1) === '') all.pop();
  return all.slice(-lines).join('\n');
}

export interface MetricsFile {
  path: string;
  metrics: Record<string, unknown>;
}

/** Every metrics.json under `root` (the pipeline writes `<root>/<dataset>/<model>_<scale>_<stage>/`). */
export function findMetrics(root: string, depth = 4): MetricsFile[] {
  const out: MetricsFile[] = [];
  if (!existsSync(root)) return out;
  const walk = (dir: string, d: number) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, entry.name);
      if (entry.isDirectory() && d > 0) walk(p, d - 1);
      else if (entry.isFile() && entry.name === 'metrics.json') {
        try {
          out.push({ path: p, metrics: JSON.parse(readFileSync(p, 'utf8')) as Record<string, unknown> });
        } catch {
          /* being written */
        }
      }
    }
  };
  walk(root, depth);
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

/** The figures the summary shows from a metrics.json. */
export function keyMetrics(m: Record<string, unknown>): string {
  const parts: string[] = [];
  const scores = (m['scores'] ?? {}) as Record<string, unknown>;
  const num = (v: unknown, digits: number) => (typeof v === 'number' ? v.toFixed(digits) : undefined);
  const f1 = num(scores['f1'], 4);
  const acc = num(scores['accuracy'], 4);
  const gps = num(m['graphs_per_sec'], 0);
  if (typeof m['epochs'] === 'number') parts.push(`epochs=${m['epochs']}`);
  if (f1) parts.push(`f1=${f1}`);
  if (acc) parts.push(`acc=${acc}`);
  if (gps) parts.push(`graphs/s=${gps}`);
  if (typeof m['batch_size'] === 'number') parts.push(`batch=${m['batch_size']}`);
  return parts.join(' ');
}
