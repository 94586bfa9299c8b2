/**
 * The job library: the shell every job script shares (src/shell/job-start.sh, environment.sh with
 * `hpc_environment`, job-run.sh) as one file, kept by its content. Its file name carries a prefix
 * of its sha256 (`job-<16 hex>.sh`): a new version is a new file beside the older ones, so a job
 * rendered earlier keeps finding the exact library it was rendered for. Infra installs it as a site
 * script (`<scriptsDir>/lib/<file>`); where a site has not (yet) got this version, the runner writes
 * it into the run's own `scripts/lib/` (libs/planning `jobLibraryFor`).
 *
 * A job script assigns its values, then checks the file's sha256 and sources it (`loadLines`):
 * sourcing it runs the job (strict mode, traps, environment, staging, the pipeline, the requeue
 * decision, `exit`).
 */
import { createHash } from 'node:crypto';
import { TemplateInputError } from '../quote/errors.ts';
import { requireAbsolutePath } from '../quote/validate.ts';
import { assign, shellFileLines } from '../shell/shell-files.ts';

/** The directory below the site's scripts dir (and a run's `scripts/`) that holds the library's versions. */
export const JOB_LIBRARY_DIR = 'lib';

function libraryText(): string {
  return [
    '# shellcheck shell=bash',
    '# The job library of @kdgat/slurm-templates: the shell every job script shares, kept by its',
    '# content (the sha256 prefix in the file name). A job script assigns its values, checks this',
    "# file's sha256 and sources it; what follows runs the job. Rendered from src/shell/: do not edit.",
    '',
    ...shellFileLines('jobStart'),
    '',
    ...shellFileLines('environment'),
    'hpc_environment',
    '',
    ...shellFileLines('jobRun'),
    '',
  ].join('\n');
}

const TEXT = libraryText();
const SHA256 = createHash('sha256').update(TEXT).digest('hex');

/** This version of the job library: its text, sha256 and content-addressed file name. */
export const JOB_LIBRARY: { readonly text: string; readonly sha256: string; readonly file: string } = {
  text: TEXT,
  sha256: SHA256,
  file: `job-${SHA256.slice(0, 16)}.sh`,
};

/** `<scriptsDir>/lib/job-<sha256 prefix>.sh`: where a site keeps this version. */
export function jobLibraryPath(scriptsDir: string): string {
  return `${requireAbsolutePath('scriptsDir', scriptsDir).replace(/\/+$/, '')}/${JOB_LIBRARY_DIR}/${JOB_LIBRARY.file}`;
}

/** Where a job finds the library, and what its error says to do when the file is missing or differs. */
export interface JobLibraryRef {
  /** Absolute path of this version's file (its name: `JOB_LIBRARY.file`). */
  path: string;
  /** The command or step that puts the file there, e.g. `npx nx run infra:up --stack osc-pitzer`. */
  fix: string;
}

/**
 * The lines of a job script that load the library: its path, sha256 and fix, the check (sha256sum,
 * or shasum on a machine without it), and the `source`. A missing or different file stops the job
 * with status 69 (EX_UNAVAILABLE) and a message naming the file, both hashes and the fix.
 */
export function loadLines(ref: JobLibraryRef): string[] {
  const path = requireAbsolutePath('jobLibrary.path', ref.path);
  if (!path.endsWith(`/${JOB_LIBRARY.file}`))
    throw new TemplateInputError(
      'jobLibrary.path',
      path,
      `a path ending in /${JOB_LIBRARY.file} (this version of the job library, named by its sha256)`,
    );
  if (ref.fix.trim() === '')
    throw new TemplateInputError('jobLibrary.fix', ref.fix, 'the step that puts the job library in place');
  return [
    '# The shell every job shares: the job library, checked by its sha256, then sourced (it runs the job).',
    assign('hpc_job_library', path),
    assign('hpc_job_library_sha256', JOB_LIBRARY.sha256),
    assign('hpc_job_library_fix', ref.fix),
    `hpc_job_library_found=$({ sha256sum || shasum -a 256; } 2>/dev/null <"$hpc_job_library") || hpc_job_library_found='no readable file'`,
    'if [[ ${hpc_job_library_found%% *} != "$hpc_job_library_sha256" ]]; then',
    '  echo "kdgat-hpc: the job library $hpc_job_library is not the one this script was rendered for (sha256 $hpc_job_library_sha256; found: ${hpc_job_library_found%%  -}); to fix: $hpc_job_library_fix" >&2',
    '  exit "$hpc_unavailable_status"',
    'fi',
    '# shellcheck source=/dev/null',
    'source "$hpc_job_library"',
  ];
}
