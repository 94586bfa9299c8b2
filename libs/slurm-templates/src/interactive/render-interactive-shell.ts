/**
 * `runner shell`: an interactive allocation that sees what a stage's job sees. Two pure outputs:
 * the command that allocates it (`salloc` with the job script's resource options, then SLURM's own
 * interactive step, `srun --interactive --preserve-env --pty`, as `LaunchParameters=use_interactive_step`
 * would start it: a step that holds no resources, so `srun` inside the shell still runs), and the
 * init that bash reads there instead of ~/.bashrc. The init is made of the job script's own parts:
 * its environment section (modules, activation, the code snapshot on PYTHONPATH), its staging
 * values and `hpc_stage_caches` of src/shell/job-run.sh; nothing of them is written twice.
 */
import type { EnvironmentView, PartitionView, ProfileView, StageView, StagingPolicy } from '../inputs.ts';
import { shq } from '../quote/shq.ts';
import { RULES, requireAbsolutePath, requireMatch } from '../quote/validate.ts';
import {
  UNAVAILABLE_EXIT_STATUS,
  cacheRootVariableValue,
  jobEnvLines,
  environmentLines,
} from '../script-sections/script-sections.ts';
import { assign, shellFunctionLines } from '../shell/shell-files.ts';
import { allocationDirectives, stagingLines } from '../train-job/render-train-job.ts';

export interface InteractiveShellInput {
  /** The allocation's name in the queue (`hpc-<experiment>-<stage>-shell`). */
  jobName: string;
  /** What the prompt calls the session, e.g. `train`; a name (letters, digits, `._-`). */
  label: string;
  profile: ProfileView;
  resources: StageView['resources'];
  /** Used only to default the GPU type of `--gres` when the resources name none. */
  partition?: Pick<PartitionView, 'gpuType'>;
  /** The stage's environment (with the run's code snapshot on a site over SSH). */
  environment: EnvironmentView;
  /**
   * The stage's data, staged as its job stages it (or, staging nothing, its cache root exported);
   * absent: nothing staged and no cache root (a shell without a stage).
   */
  data?: {
    stage: Pick<StageView, 'stage' | 'dataset'>;
    staging: StagingPolicy;
    cacheDirs: Record<string, string>;
    /** The environment variable the stage's pipeline reads the caches' root from, if it declares one. */
    cacheRootVariable?: string;
    /** The site's installed stage_data.sh (stack output `scripts.stageData`). */
    stageDataScript: string;
    /** What the stage's job exports (its `jobEnv`: pipeline, stack and stage `env`, the raw-data variable). */
    jobEnv?: readonly (readonly [string, string])[];
  };
  /** Where the init will be on the site: read by bash on the allocation's first node. */
  initPath: string;
  /**
   * Another SLURM cluster of the site (its SlurmctldClusterName), allocated with `-M` from the same
   * login node; absent: the login node's own cluster.
   */
  cluster?: string;
}

export interface RenderedInteractiveShell {
  /** Run on the login node (or here, for a local site) with a terminal: allocates, then the shell. */
  argv: string[];
  /** The init's text (bash `--rcfile`), to be written at `initPath`. */
  init: string;
}

export function renderInteractiveShell(input: InteractiveShellInput): RenderedInteractiveShell {
  const jobName = requireMatch('job name', input.jobName, RULES.jobName);
  const label = requireMatch('label', input.label, RULES.name);
  const initPath = requireAbsolutePath('initPath', input.initPath);
  const cluster =
    input.cluster === undefined ? undefined : requireMatch('cluster', input.cluster, RULES.name);
  const argv = [
    'salloc',
    // salloc sets the allocation's cluster in its environment, so the srun below goes there too.
    ...(cluster !== undefined ? [`--clusters=${cluster}`] : []),
    `--job-name=${jobName}`,
    ...allocationDirectives(input.profile, input.resources, input.partition?.gpuType).map(
      ([flag, value]) => `--${flag}=${value}`,
    ),
    // SLURM's default InteractiveStepOptions: the shell on the first node, in a step of no resources.
    'srun',
    '--interactive',
    '--preserve-env',
    '--pty',
    'bash',
    '--rcfile',
    initPath,
    '-i',
  ];
  return { argv, init: initLines(input, label).join('\n') };
}

function initLines(input: InteractiveShellInput, label: string): string[] {
  const { data } = input;
  return [
    '# shellcheck shell=bash',
    `# kdgat-hpc shell (${label}): what its job sees before the pipeline starts.`,
    '# Rendered by @kdgat/slurm-templates for `runner shell`: re-render, do not edit. Read by bash',
    "# (--rcfile) instead of ~/.bashrc: the user's own startup first, then the job's environment.",
    'if [[ -f ~/.bashrc ]]; then',
    '  # shellcheck source=/dev/null',
    '  source ~/.bashrc',
    'fi',
    '',
    assign('hpc_profile', input.profile.name),
    assign('hpc_unavailable_status', UNAVAILABLE_EXIT_STATUS),
    ...(data ? dataLines(data) : []),
    '',
    ...environmentLines(input.environment, input.profile),
    // The activation leaves nounset on, as a job script wants it; an interactive shell does not.
    'set +u',
    '',
    ...(data
      ? [
          // Its inputs, as job-run.sh declares them (hpc_cache_root is assigned above only when
          // nothing is staged, the one case that reads it).
          'declare -g hpc_stage_data_script hpc_cache_root hpc_cache_root_variable',
          'declare -ga hpc_stage_datasets',
          ...shellFunctionLines('jobRun', 'hpc_stage_caches'),
          'if ! hpc_stage_caches; then',
          '  echo "kdgat-hpc shell: staging failed (the job would stop here); this shell goes on without it" >&2',
          'fi',
        ]
      : ['echo "kdgat-hpc shell: no stage, so no data staged"']),
    '',
    `PS1=${shq(`(hpc ${label}) `)}"\${PS1-}"`,
    "printf 'kdgat-hpc shell: job %s on %s, partition %s; TMPDIR=%s; HPC_CACHE_ROOT=%s%s\\n' \\",
    '  "${SLURM_JOB_ID-}" "$(hostname)" "${SLURM_JOB_PARTITION-}" "${TMPDIR-}" "${HPC_CACHE_ROOT-}" \\',
    '  "${hpc_cache_root_variable:+ (also $hpc_cache_root_variable)}"',
    'echo "kdgat-hpc shell: exit this shell to end the allocation"',
    '',
  ];
}

function dataLines(data: NonNullable<InteractiveShellInput['data']>): string[] {
  return [
    assign('hpc_stage_data_script', requireAbsolutePath('scripts.stageData', data.stageDataScript)),
    assign('hpc_cache_root_variable', cacheRootVariableValue(data.cacheRootVariable)),
    ...jobEnvLines(data.jobEnv ?? []),
    ...stagingLines({ staging: data.staging, layout: { cacheDirs: data.cacheDirs }, stage: data.stage }),
  ];
}
