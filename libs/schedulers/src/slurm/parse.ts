// Pure parsers for SLURM command output (tested against recorded output in parse.test.ts).
import { isActive, normaliseState, type TaskAccounting, type TaskStatus } from '../core.ts';

/** `sbatch --parsable` prints `jobid` or `jobid;cluster`. */
export function parseParsableJobId(stdout: string): string {
  const first = stdout.trim().split('\n').pop()?.split(';')[0]?.trim() ?? '';
  if (!/^\d+$/.test(first))
    throw new Error(`sbatch --parsable printed ${JSON.stringify(stdout.trim())}, expected a numeric job id`);
  return first;
}

/**
 * The start time `sbatch --test-only` predicts ("Job 7 to start at 2026-11-27T22:04:37 using 1
 * processors on nodes c04 in partition gpu"): the text as printed (the site's local time) and where.
 */
export function parseTestOnlyStart(
  message: string,
): { start: string; nodes?: string; partition?: string } | undefined {
  const m =
    /to start at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:.*? on nodes (\S+))?(?:.*? in partition (\S+))?/.exec(
      message,
    );
  if (!m) return undefined;
  return { start: m[1]!, ...(m[2] ? { nodes: m[2] } : {}), ...(m[3] ? { partition: m[3] } : {}) };
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

export const SQUEUE_FORMAT = '%F|%K|%i|%T|%M|%r|%N';

/** `squeue -h -r -o '%F|%K|%i|%T|%M|%r|%N'` → tasks keyed by the submitted (array) job id. */
export function parseSqueue(text: string): TaskStatus[] {
  const out: TaskStatus[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const [arrayJobId, taskId, , state, time, reason, nodeList] = line.split('|');
    if (!arrayJobId || !state) continue;
    const idx = taskId && /^\d+$/.test(taskId.trim()) ? Number(taskId) : undefined;
    const task: TaskStatus = { jobId: arrayJobId.trim(), state: normaliseState(state) };
    if (idx !== undefined) task.arrayIndex = idx;
    const elapsed = parseElapsed(time ?? '');
    if (elapsed !== undefined) task.elapsedSeconds = elapsed;
    if (reason && reason.trim() !== 'None') task.reason = reason.trim();
    const nodes = expandHostlist(nodeList ?? '');
    if (nodes.length > 0) task.nodes = nodes;
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
    const nodes = expandHostlist(kv.get('NodeList') ?? '');
    if (nodes.length > 0) task.nodes = nodes;
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

/**
 * SLURM hostlists → hostnames: `c[01-03],gpu5` → c01 c02 c03 gpu5 (zero padding kept, several
 * bracket groups multiplied out). Empty for `None assigned`, `(null)` and ''.
 */
export function expandHostlist(text: string): string[] {
  const t = text.trim();
  if (t === '' || t === '(null)' || /^none/i.test(t)) return [];
  const names: string[] = [];
  let depth = 0;
  let part = '';
  for (const ch of t) {
    if (ch === '[') depth++;
    if (ch === ']') depth--;
    if (ch === ',' && depth === 0) {
      names.push(...expandHostPattern(part));
      part = '';
    } else part += ch;
  }
  names.push(...expandHostPattern(part));
  return names;
}

function expandHostPattern(pattern: string): string[] {
  const m = /^([^[]*)\[([^\]]*)\](.*)$/.exec(pattern.trim());
  if (!m) return pattern.trim() ? [pattern.trim()] : [];
  const [, head = '', ranges = '', tail = ''] = m;
  const items = ranges.split(',').flatMap((r) => {
    const [a = '', b] = r.split('-');
    if (b === undefined) return [a];
    const width = a.length;
    const out: string[] = [];
    for (let i = Number(a); i <= Number(b); i++) out.push(String(i).padStart(width, '0'));
    return out;
  });
  const tails = expandHostPattern(tail);
  return items.flatMap((i) => (tails.length > 0 ? tails.map((x) => `${head}${i}${x}`) : [`${head}${i}`]));
}

/** sacct's CPU times (`[DD-[hh:]]mm:ss[.sss]`: `00:01.234`, `01:02:03`, `1-02:03:04`) → seconds. */
export function parseCpuTime(text: string): number | undefined {
  const m = /^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$/.exec(text.trim());
  if (!m) return undefined;
  return Number(m[1] ?? 0) * 86400 + Number(m[2] ?? 0) * 3600 + Number(m[3]) * 60 + Number(m[4]);
}

const UNIT_POWER: Record<string, number> = { K: 1, M: 2, G: 3, T: 4, P: 5 };

/**
 * sacct's sizes (`123456K`, `4000M`, `1.50G`, `0`) → MB (1024-based, as SLURM counts). A size with
 * no letter is in `bareUnit` (MaxRSS counts kilobytes, ReqMem megabytes). Older SLURM appended `n`
 * (per node) or `c` (per cpu) to ReqMem: returned as `per`.
 */
export function parseSize(
  text: string,
  bareUnit: 'K' | 'M',
): { mb: number; per?: 'node' | 'cpu' } | undefined {
  const m = /^(\d+(?:\.\d+)?)([KMGTP])?([nc])?$/.exec(text.trim());
  if (!m) return undefined;
  const power = UNIT_POWER[m[2] ?? bareUnit]!;
  const mb = Number(m[1]) * 1024 ** (power - 2);
  return m[3] ? { mb, per: m[3] === 'n' ? 'node' : 'cpu' } : { mb };
}

/** The fields the poll asks sacct for, in this order (`-n -P`, steps included: no `-X`). */
export const SACCT_FIELDS =
  'JobIDRaw,JobID,State,ExitCode,ElapsedRaw,TotalCPU,MaxRSS,NodeList,AllocCPUS,ReqMem,TRESUsageInTot';

/**
 * `sacct -n -P -o <SACCT_FIELDS>` (steps included) → one status per job or array task, keyed like
 * squeue's: the allocation line gives state, exit code, elapsed and nodes; its steps (`.batch`,
 * `.extern`, `.0` …) give what was used. An ended task carries `accounting`: TotalCPU summed over
 * its steps (sacct's allocation line is the same sum, so it is read only when no step is listed),
 * the largest step MaxRSS, and the request. A pending array remainder (`123_[4-9%2]`) becomes one
 * pending task per index.
 */
export function parseSacct(text: string): TaskStatus[] {
  interface Line {
    raw: string;
    state: string;
    exit: string;
    elapsed: string;
    cpu: string;
    rss: string;
    nodeList: string;
    allocCpus: string;
    reqMem: string;
    tresTotal: string;
  }
  const jobs = new Map<string, { line: Line; steps: Map<string, Line> }>();
  const stepRows: [string, string, Line][] = [];
  for (const row of text.split('\n')) {
    if (!row.trim()) continue;
    const [
      raw = '',
      jobIdText = '',
      state = '',
      exit = '',
      elapsed = '',
      cpu = '',
      rss = '',
      nodeList = '',
      allocCpus = '',
      reqMem = '',
      tresTotal = '',
    ] = row.split('|');
    const line: Line = { raw, state, exit, elapsed, cpu, rss, nodeList, allocCpus, reqMem, tresTotal };
    const dot = jobIdText.indexOf('.');
    if (dot < 0) jobs.set(jobIdText, { line, steps: jobs.get(jobIdText)?.steps ?? new Map() });
    else stepRows.push([jobIdText.slice(0, dot), jobIdText.slice(dot + 1), line]);
  }
  for (const [owner, step, line] of stepRows) jobs.get(owner)?.steps.set(step, line);

  const out: TaskStatus[] = [];
  for (const [jobIdText, { line, steps }] of jobs) {
    const m = /^(\d+)(?:_(\d+|\[.*\]))?$/.exec(jobIdText);
    if (!m) continue;
    const state = normaliseState(line.state);
    if (m[2]?.startsWith('[')) {
      for (const i of expandIndexRange(m[2].slice(1, -1))) out.push({ jobId: m[1]!, arrayIndex: i, state });
      continue;
    }
    const task: TaskStatus = { jobId: m[1]!, state };
    if (line.raw) task.taskJobId = line.raw;
    if (m[2] !== undefined) task.arrayIndex = Number(m[2]);
    if (line.exit) task.exitCode = line.exit;
    if (/^\d+$/.test(line.elapsed)) task.elapsedSeconds = Number(line.elapsed);
    const nodes = expandHostlist(line.nodeList);
    if (nodes.length > 0) task.nodes = nodes;
    // Accounting for an ended task that ran: a job cancelled while pending has no steps and no time.
    const ran = steps.size > 0 || (parseCpuTime(line.cpu) !== undefined && Number(line.elapsed) > 0);
    if (!isActive(state) && task.elapsedSeconds !== undefined && ran)
      task.accounting = accountingOf(line, [...steps], nodes.length);
    out.push(task);
  }
  return out;
}

function accountingOf(
  job: { cpu: string; allocCpus: string; elapsed: string; reqMem: string },
  steps: [string, { cpu: string; rss: string; tresTotal: string }][],
  nodeCount: number,
): TaskAccounting {
  const stepCpu = steps.map(([, s]) => parseCpuTime(s.cpu) ?? 0);
  const cpuSeconds = steps.length > 0 ? stepCpu.reduce((a, b) => a + b, 0) : (parseCpuTime(job.cpu) ?? 0);
  const rss = steps.flatMap(([, s]) => {
    const size = parseSize(s.rss, 'K');
    return size ? [size.mb] : [];
  });
  // TRESUsageInTot's mem: a step's peak memory summed over its tasks, on every node.
  const totals = steps.flatMap(([, s]) => {
    const mem = /(?:^|,)mem=([^,]+)/.exec(s.tresTotal)?.[1];
    const size = mem === undefined ? undefined : parseSize(mem, 'K');
    return size ? [size.mb] : [];
  });
  const allocCpus = /^\d+$/.test(job.allocCpus) ? Number(job.allocCpus) : 0;
  const req = parseSize(job.reqMem, 'M');
  const reqMemMB = !req
    ? null
    : req.per === 'node'
      ? req.mb * Math.max(1, nodeCount)
      : req.per === 'cpu'
        ? req.mb * Math.max(1, allocCpus)
        : req.mb;
  return {
    cpuSeconds: Math.round(cpuSeconds * 1000) / 1000,
    // 0 everywhere: no sample was taken (a step shorter than JobAcctGatherFrequency).
    maxRssMB: rss.some((x) => x > 0) ? Math.round(Math.max(...rss) * 1000) / 1000 : null,
    ...(totals.length > 0
      ? { totalRssMB: totals.some((x) => x > 0) ? Math.round(Math.max(...totals) * 1000) / 1000 : null }
      : {}),
    elapsedSeconds: Number(job.elapsed),
    allocCpus,
    reqMemMB,
    steps: steps.map(([name]) => name),
  };
}
