// Pure parsers for SLURM command output (tested against recorded output in parse.test.ts).
import { normaliseState, type TaskStatus } from '../core.ts';

/** `sbatch --parsable` prints `jobid` or `jobid;cluster`. */
export function parseParsableJobId(stdout: string): string {
  const first = stdout.trim().split('\n').pop()?.split(';')[0]?.trim() ?? '';
  if (!/^\d+$/.test(first))
    throw new Error(`sbatch --parsable printed ${JSON.stringify(stdout.trim())}, expected a numeric job id`);
  return first;
}

/** `scontrol show config` → key/value map (keys as printed, e.g. `MaxArraySize`). */
export function parseShowConfig(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^(\S+)\s*=\s*(.*)$/.exec(line.trim());
    if (m?.[1] && m[2] !== undefined) out.set(m[1], m[2].trim());
  }
  return out;
}

/** SLURM durations: `[days-]hours:minutes:seconds`, `minutes:seconds`, `minutes`. */
export function parseElapsed(text: string): number | undefined {
  const t = text.trim();
  if (t === '' || t === 'N/A' || t === 'INVALID' || t === 'UNLIMITED') return undefined;
  const m = /^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$/.exec(t);
  if (!m) return undefined;
  const days = Number(m[1] ?? 0);
  const parts = [m[2], m[3], m[4]].filter((p): p is string => p !== undefined).map(Number);
  let secs = 0;
  if (m[1] !== undefined) {
    // days-hours[:minutes[:seconds]]
    const [h = 0, mi = 0, s = 0] = parts;
    secs = h * 3600 + mi * 60 + s;
  } else if (parts.length === 3) secs = parts[0]! * 3600 + parts[1]! * 60 + parts[2]!;
  else if (parts.length === 2) secs = parts[0]! * 60 + parts[1]!;
  else secs = parts[0]! * 60;
  return days * 86400 + secs;
}

export const SQUEUE_FORMAT = '%F|%K|%i|%T|%M|%r';

/** `squeue -h -r -o '%F|%K|%i|%T|%M|%r'` → tasks keyed by the submitted (array) job id. */
export function parseSqueue(text: string): TaskStatus[] {
  const out: TaskStatus[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const [arrayJobId, taskId, , state, time, reason] = line.split('|');
    if (!arrayJobId || !state) continue;
    const idx = taskId && /^\d+$/.test(taskId.trim()) ? Number(taskId) : undefined;
    const task: TaskStatus = { jobId: arrayJobId.trim(), state: normaliseState(state) };
    if (idx !== undefined) task.arrayIndex = idx;
    const elapsed = parseElapsed(time ?? '');
    if (elapsed !== undefined) task.elapsedSeconds = elapsed;
    if (reason && reason.trim() !== 'None') task.reason = reason.trim();
    out.push(task);
  }
  return out;
}

/** `scontrol show job -o <id>`: one line per record (one per array task), `Key=Value` pairs. */
export function parseShowJob(text: string): TaskStatus[] {
  const out: TaskStatus[] = [];
  for (const line of text.split('\n')) {
    if (!line.includes('JobId=')) continue;
    const kv = new Map<string, string>();
    // Values may contain spaces only in a few keys (Reason text, Command); split on ` Key=`.
    for (const m of line.matchAll(/(?:^|\s)([A-Za-z:]+)=(\S*)/g)) kv.set(m[1]!, m[2]!);
    const arrayJobId = kv.get('ArrayJobId');
    const jobId = arrayJobId ?? kv.get('JobId')!;
    const task: TaskStatus = { jobId, state: normaliseState(kv.get('JobState') ?? '') };
    const own = kv.get('JobId');
    if (own) task.taskJobId = own;
    const arrayTask = kv.get('ArrayTaskId');
    if (arrayJobId !== undefined && arrayTask !== undefined) {
      if (/^\d+$/.test(arrayTask)) task.arrayIndex = Number(arrayTask);
      else {
        // A still-pending remainder such as `3-9%2`: expand it so every task is accounted for.
        for (const i of expandIndexRange(arrayTask)) {
          const pending: TaskStatus = { jobId, state: task.state, arrayIndex: i };
          out.push(pending);
        }
        continue;
      }
    }
    const exit = kv.get('ExitCode');
    if (exit) task.exitCode = exit;
    const elapsed = parseElapsed(kv.get('RunTime') ?? '');
    if (elapsed !== undefined) task.elapsedSeconds = elapsed;
    const reason = kv.get('Reason');
    if (reason && reason !== 'None') task.reason = reason;
    const restarts = kv.get('Restarts');
    if (restarts && /^\d+$/.test(restarts)) task.restarts = Number(restarts);
    out.push(task);
  }
  return out;
}

/** `0-9%2`, `1,3,5-7` → indices. */
export function expandIndexRange(text: string): number[] {
  const out: number[] = [];
  for (const part of text.split('%')[0]!.split(',')) {
    const m = /^(\d+)(?:-(\d+))?(?::(\d+))?$/.exec(part.trim());
    if (!m) continue;
    const a = Number(m[1]);
    const b = m[2] !== undefined ? Number(m[2]) : a;
    const step = m[3] !== undefined ? Number(m[3]) : 1;
    for (let i = a; i <= b; i += step) out.push(i);
  }
  return out;
}

/** `sacct -n -P -X -o JobIDRaw,JobID,State,ExitCode,ElapsedRaw` → tasks. */
export function parseSacct(text: string): TaskStatus[] {
  const out: TaskStatus[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const [, jobIdText = '', state = '', exit = '', elapsedRaw = ''] = line.split('|');
    const m = /^(\d+)(?:_(\d+|\[.*\]))?$/.exec(jobIdText);
    if (!m) continue;
    const task: TaskStatus = { jobId: m[1]!, state: normaliseState(state), exitCode: exit };
    const raw = line.split('|')[0];
    if (raw) task.taskJobId = raw;
    if (m[2] !== undefined && /^\d+$/.test(m[2])) task.arrayIndex = Number(m[2]);
    if (/^\d+$/.test(elapsedRaw)) task.elapsedSeconds = Number(elapsedRaw);
    out.push(task);
  }
  return out;
}
