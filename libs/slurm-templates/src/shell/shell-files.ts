/**
 * The static shell of the rendered scripts lives in the .sh files beside this module, where it is
 * shellchecked and formatted (`nx run slurm-templates:lint`). They are read once, when this module
 * loads; rendering does no I/O. A rendered script carries their text itself, after the values it
 * assigns: a job on the cluster sources nothing from the repository.
 */
import { readFileSync } from 'node:fs';
import { shq } from '../quote/shq.ts';

/** The shell files, by role: see each file's header for what it holds and the variables it reads. */
export const SHELL_FILES = {
  stageData: 'stage-data.sh',
  epilog: 'epilog.sh',
  jobStart: 'job-start.sh',
  environment: 'environment.sh',
  jobRun: 'job-run.sh',
  kernel: 'kernel.sh',
} as const;
export type ShellFile = keyof typeof SHELL_FILES;

/** The first line of every shell file: tells shellcheck the dialect of a file without a shebang. */
const LINT_HEADER = '# shellcheck shell=bash';

const TEXT = Object.fromEntries(
  Object.entries(SHELL_FILES).map(([key, file]) => [
    key,
    readFileSync(new URL(`./${file}`, import.meta.url), 'utf8'),
  ]),
) as Record<ShellFile, string>;

/**
 * The lines a shell file contributes to a script: a line naming the file, then its text without the
 * lint header (the script has its own shebang).
 */
export function shellFileLines(name: ShellFile): string[] {
  const lines = TEXT[name].replace(/\n$/, '').split('\n');
  if (lines[0] !== LINT_HEADER) {
    throw new Error(`slurm-templates: src/shell/${SHELL_FILES[name]} must start with '${LINT_HEADER}'`);
  }
  return [`# ---- @kdgat/slurm-templates src/shell/${SHELL_FILES[name]} ----`, ...lines.slice(1)];
}

/**
 * One function of a shell file, with the comment above it, for a script that needs it without the
 * rest of the file: the init of `runner shell` stages as a job does (`hpc_stage_caches` of
 * job-run.sh) but runs no pipeline. shfmt keeps every function of these files as `name() {` …
 * `}` at the start of a line (`nx run slurm-templates:lint`).
 */
export function shellFunctionLines(name: ShellFile, fn: string): string[] {
  const lines = TEXT[name].split('\n');
  const start = lines.indexOf(`${fn}() {`);
  const end = start < 0 ? -1 : lines.indexOf('}', start);
  if (end < 0) throw new Error(`slurm-templates: src/shell/${SHELL_FILES[name]} defines no function ${fn}`);
  let top = start;
  while (top > 0 && lines[top - 1]!.startsWith('#')) top--;
  return [
    `# ---- ${fn} of @kdgat/slurm-templates src/shell/${SHELL_FILES[name]} ----`,
    ...lines.slice(top, end + 1),
  ];
}

const NAME = /^(hpc_[a-z0-9_]+|[A-Z][A-Z0-9_]*)$/;

function checkName(name: string): string {
  if (!NAME.test(name)) throw new Error(`slurm-templates: ${name} is not a variable name of the templates`);
  return name;
}

/** `name=value`, the value quoted by `shq` (`export name=value` with `exported`). */
export function assign(name: string, value: string | number, exported = false): string {
  return `${exported ? 'export ' : ''}${checkName(name)}=${shq(value)}`;
}

/** `name=( … )`: one line of words per group, each word quoted by `shq`; `name=()` when empty. */
export function assignArray(name: string, groups: readonly (readonly (string | number)[])[]): string[] {
  const rows = groups.filter((g) => g.length > 0);
  if (rows.length === 0) return [`${checkName(name)}=()`];
  return [`${checkName(name)}=(`, ...rows.map((g) => `  ${g.map((w) => shq(w)).join(' ')}`), ')'];
}
