// One rule for every kind of value that reaches a job script. The spec, cluster and environment
// schemas validate with these rules (so a bad value is refused with file:line before anything is
// rendered), and @kdgat/slurm-templates guards its inputs with the very same rules (so the two can
// never disagree). `expected` is what a user reads: it names the kind of value with an example.
import { z } from 'zod';

export interface ValueRule {
  readonly pattern: RegExp;
  /** What was expected, in the user's words, e.g. "a GPU type such as v100". */
  readonly expected: string;
}

/**
 * The pre-timeout signals that can carry the requeue request to the pipeline. TERM is the
 * scheduler's own kill signal (trapped separately) and INT stops Python outright.
 */
export const REQUEUE_SIGNALS = ['USR1', 'USR2', 'HUP', 'URG', 'ALRM'] as const;

const NAME_CHARS = 'letters, digits, _ . - (starting with a letter or digit)';

export const SCRIPT_VALUES = {
  /** Stage ids, dataset/model/scale/stage names, partitions, experiment and environment names. */
  name: {
    pattern: /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/,
    expected: `a name of ${NAME_CHARS}, at most 64 characters`,
  },
  /** `#SBATCH --job-name`, built by the templates from the experiment and the stage id. */
  jobName: { pattern: /^[A-Za-z0-9][A-Za-z0-9_.-]*$/, expected: `a job name of ${NAME_CHARS}` },
  /** `#SBATCH --account`: sbatch would read a leading `-` as an option. */
  account: { pattern: /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, expected: 'a SLURM account such as PAS1266' },
  gpuType: { pattern: /^[a-z0-9]+$/, expected: 'a GPU type such as v100, a100 or h100' },
  /** sbatch --time forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS. */
  slurmTime: {
    pattern: /^(?:(\d+)-)?(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?$/,
    expected: 'a SLURM time such as "8:00:00" or "7-00:00:00"',
  },
  /** `module load` arguments (Lmod). */
  moduleName: { pattern: /^[A-Za-z0-9][A-Za-z0-9._/+-]*$/, expected: 'a module name such as cuda/12.4.1' },
  /** The site's Lmod init script, sourced where a shell has no `module` command yet. */
  lmodInit: {
    pattern: /^\/[A-Za-z0-9_./+-]*$/,
    expected: 'an absolute path such as /etc/profile.d/lmod.sh',
  },
  /** Pipeline config keys, dotted or not (`-O training.lr 0.001`, `lr=0.001`, `--lr 0.001`). */
  overrideKey: {
    pattern: /^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$/,
    expected: 'a pipeline config key such as training.lr or lr (lower-case words joined by dots)',
  },
  /** The pre-timeout signal forwarded to the pipeline (see REQUEUE_SIGNALS). */
  requeueSignal: {
    pattern: new RegExp(`^(${REQUEUE_SIGNALS.join('|')})$`),
    expected: `one of ${REQUEUE_SIGNALS.join(', ')}`,
  },
  /** A site path in a cluster profile: absolute, or relative to the repository (the local stack). */
  sitePath: {
    pattern: /^[A-Za-z0-9_./][A-Za-z0-9_./+@,=-]*$/,
    expected:
      'a path of letters, digits and _ . / + @ , = - (not starting with -; no spaces, ~ or shell characters)',
  },
  /** An absolute path sbatch reads from a directive line (`--output`), where nothing can be quoted. */
  directivePath: {
    pattern: /^\/[A-Za-z0-9_./+@,=-]*$/,
    expected: 'an absolute path of letters, digits and _ . / + @ , = - (sbatch reads it unquoted)',
  },
  /** A directory inside a pipeline's code (`code.pythonPath`), relative, put on a job's PYTHONPATH. */
  codePath: {
    pattern:
      /^(?!\.\.?(\/|$))[A-Za-z0-9_][A-Za-z0-9_.-]*(\/(?!\.\.?(\/|$))[A-Za-z0-9_][A-Za-z0-9_.-]*)*$|^\.$/,
    expected:
      'a directory inside the code, relative (such as src or . ; letters, digits, _ . - and /, no ..)',
  },
  /** Job ids in `--dependency`. */
  /** An environment variable a job exports by name (a pipeline's cache-root variable). */
  envName: { pattern: /^[A-Z_][A-Z0-9_]*$/, expected: 'an environment variable name such as DATA_ROOT' },
  /**
   * The value of a variable a job exports (`env:` of a pipeline, a stack or a stage): a word such as
   * a path, a URL, a number or a list joined by commas or colons (quoted by the one quoting helper
   * all the same; no spaces or shell text, so what a reader sees in the script is what the job gets).
   */
  envValue: {
    pattern: /^[A-Za-z0-9_./:@%+=,~][A-Za-z0-9_./:@%+=,~-]{0,4095}$/,
    expected:
      'a value of letters, digits and _ . / : @ % + = , ~ - (not starting with -; no spaces or shell characters), at most 4096 characters',
  },
  /** `python -m <module>`: a dotted Python module name. */
  pythonModule: {
    pattern: /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/,
    expected: 'a Python module name such as mypkg.cli',
  },
  jobId: { pattern: /^\d+(_\d+)?$/, expected: 'a SLURM job id such as 12345 or 12345_6' },
  /**
   * The unit a site bills in (a cluster profile's `charging.unit` and `balance.unit`). It reaches no
   * job script, but is printed beside every cost, budget and balance, so it follows the same rule.
   */
  billingUnit: { pattern: /^[A-Za-z][A-Za-z0-9_-]{0,15}$/, expected: 'a unit name such as USD or SU' },
} as const satisfies Record<string, ValueRule>;

export type ScriptValueKind = keyof typeof SCRIPT_VALUES;

export function matchesRule(rule: ValueRule, value: unknown): value is string {
  return typeof value === 'string' && rule.pattern.test(value);
}

/** The zod string schema of a rule: the schemas' one way to declare a script value. */
export function ruleString(rule: ValueRule): z.ZodString {
  return z.string().regex(rule.pattern, rule.expected);
}
