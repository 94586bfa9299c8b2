// sbatch options given for one submission (`SubmitRequest.overrides`): a recovery's `--exclude`,
// `--mem`, `--time`, `--array` and `--export`. They go to sbatch as argv (no shell), before the
// script, so they override its `#SBATCH` lines; still, only these options with these value forms
// are accepted: a value that sbatch could read as another option, or a job script as code, is refused.
import { SchedulerError } from './core.ts';

/** A node name as SLURM prints it expanded (`c0201`, `p0237.ten.osc.edu`). */
const NODE = '[A-Za-z0-9][A-Za-z0-9_.-]{0,63}';
/** An environment variable assignment the pipeline reads (the run contract's OOM batch size, `NAME=16`). */
const ASSIGNMENT = '[A-Z_][A-Z0-9_]{0,63}=[A-Za-z0-9_.:/-]{0,256}';

/** Each option a submission may carry: its value's form and what a user reads when it is wrong. */
export const SUBMIT_OVERRIDES = {
  exclude: {
    pattern: new RegExp(`^${NODE}(,${NODE})*$`),
    expected: 'node names separated by commas, such as c0201,c0202',
  },
  mem: { pattern: /^[1-9][0-9]{0,6}[MG]$/, expected: 'a whole memory size per node such as 16G or 512M' },
  /** sbatch --time forms (SCRIPT_VALUES.slurmTime of @kdgat/config; a run-record test checks they agree). */
  time: {
    pattern: /^(?:(\d+)-)?(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?$/,
    expected: 'a SLURM time such as 00:20:00 or 1-12:00:00',
  },
  array: {
    pattern: /^\d{1,7}(,\d{1,7})*$/,
    expected: 'array indices separated by commas, such as 3 or 1,4,7',
  },
  export: {
    pattern: new RegExp(`^ALL(,${ASSIGNMENT})+$`),
    expected: 'ALL followed by NAME=value assignments, such as ALL,BATCH_SIZE=16',
  },
} as const;

export type SubmitOverrideName = keyof typeof SUBMIT_OVERRIDES;

/** `--name=value` split into its name and value, or why it is not an accepted override. */
export function parseOverride(
  option: string,
): { name: SubmitOverrideName; value: string } | { problem: string } {
  const m = /^--([a-z]+)=(.*)$/s.exec(option);
  if (!m) return { problem: `${JSON.stringify(option)}: expected --name=value` };
  const name = m[1]!;
  const value = m[2]!;
  if (!Object.hasOwn(SUBMIT_OVERRIDES, name))
    return {
      problem: `${JSON.stringify(option)}: --${name} is not an option a submission may override (expected one of ${Object.keys(
        SUBMIT_OVERRIDES,
      )
        .map((k) => `--${k}`)
        .join(', ')})`,
    };
  const rule = SUBMIT_OVERRIDES[name as SubmitOverrideName];
  if (!rule.pattern.test(value))
    return {
      problem: `${JSON.stringify(option)}: --${name} ${JSON.stringify(value)} is not ${rule.expected}`,
    };
  return { name: name as SubmitOverrideName, value };
}

/**
 * The overrides of a request by option name (the last one wins, as on sbatch's command line).
 * Throws SchedulerError naming every option that is not accepted.
 */
export function checkOverrides(request: {
  name: string;
  overrides?: readonly string[];
}): Map<SubmitOverrideName, string> {
  const out = new Map<SubmitOverrideName, string>();
  const problems: string[] = [];
  for (const option of request.overrides ?? []) {
    const parsed = parseOverride(option);
    if ('problem' in parsed) problems.push(parsed.problem);
    else out.set(parsed.name, parsed.value);
  }
  if (problems.length > 0)
    throw new SchedulerError(
      `refused the overrides of ${request.name}: ${problems.join('; ')}`,
      'sbatch',
      problems.join('\n'),
    );
  return out;
}

/** `--array=1,4,7` as indices. */
export function arrayIndicesOf(value: string): number[] {
  return value.split(',').map(Number);
}

/** `--export=ALL,A=1,B=x` as the variables it sets. */
export function exportedVariables(value: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of value.split(',').slice(1)) {
    const i = part.indexOf('=');
    out[part.slice(0, i)] = part.slice(i + 1);
  }
  return out;
}
