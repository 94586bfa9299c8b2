// The shapes the run's phases hand each other (prepare → size → cost → guard → record → preflight →
// submit), in one file that imports no phase: each phase imports these, never another phase's types.
import type { Connection, LoadedSpec, ResolvedExperiment, ResolvedTune } from '@kdgat/config';
import type {
  FromStudy,
  Placement,
  PlanCosting,
  PreflightReport,
  RightSized,
  RunPlan,
  Sizing,
  StackConfigs,
  StackOutputs,
  StackOutputsSource,
} from '@kdgat/planning';
import type { Manifest, Output, Reproduction, ResolvedInput, RunRecord } from '@kdgat/run-record';
import type { Scheduler } from '@kdgat/schedulers';
import type { SiteFiles } from '@kdgat/transport';
import type { StageHistory } from '@kdgat/usage';

/** What `train`, `plan` and `tune` are asked (the CLI's flags, or a test's). */
export interface RunOptions {
  specPath?: string;
  fromManifest?: string;
  /** A study name or directory: train its best trial's values (`train --from-study S --best`). */
  fromStudy?: string;
  stack?: string;
  stackSource: StackOutputsSource;
  /** `plan` of a stack that is not provisioned: its outputs predicted from the declared config. */
  declaredSource?: StackOutputsSource;
  /** `--from-manifest`: run even though the environment's lock changed since the recorded run. */
  allowEnvChange?: boolean;
  scheduler?: 'slurm' | 'local';
  /** A site of several clusters: run on this one (its name or SLURM name), or `auto` (place.ts). */
  cluster?: string;
  /** For tests and bench: a scheduler to use instead of constructing one. */
  schedulerInstance?: Scheduler;
  force?: boolean;
  /** Apply the requests sized from history (`train --right-size`); recorded in the manifest. */
  rightSize?: boolean;
  /** A site over SSH: send python/ with uncommitted changes (the diff is kept with the run). */
  allowDirty?: boolean;
  /** The tool's own checkout: the default pipeline's code, the Pulumi program. */
  repoRoot: string;
  /** Where stacks are declared and the runner's local files go (the workspace; default: repoRoot's own). */
  configs?: StackConfigs;
  log?: (line: string) => void;
}

export interface Spec {
  file: string;
  text: string;
  loaded: LoadedSpec;
  resolved: ResolvedExperiment;
  /** `--from-manifest`: the recorded run. */
  source?: Manifest;
  fromStudy?: FromStudy;
}

export interface Site {
  name: string;
  outputs: StackOutputs;
  source: StackOutputsSource;
  /** How the site is reached (the stack's `connection` output). */
  connection: Connection;
  /** Where this machine keeps runs: the site's runs dir, or its local copy for a site over SSH. */
  runsRoot: string;
  /** The site's files over SSH (undefined when the runs dir is on this machine). */
  files?: SiteFiles;
  /** `--from-manifest --allow-env-change`: the environments whose lock changed, by name. */
  envChanges?: Record<string, { changed: boolean; differences: string[] }>;
  inputs: ResolvedInput[];
}

/** What the prepare phase hands on: the spec, where it runs, the scheduler, the jobs, the study. */
export interface Prepared {
  spec: Spec;
  site: Site;
  scheduler: Scheduler;
  plan: RunPlan;
  study?: StudyHooks;
  /** A site of several clusters: where the run goes and why (place.ts). */
  placement?: Placement;
}

/** Where the run goes: its spec resolved for that cluster, and the placement the manifest keeps. */
export interface Placed {
  spec: Spec;
  placement?: Placement;
}

/** What the size phase made: the spec as it will be rendered, and the history it read. */
export interface Sized {
  /** The spec with each stage's requests as they will be rendered. */
  spec: Spec;
  sizing: Sizing;
  histories: Map<string, StageHistory>;
}

/** The jobs and what they cost, as the record phase writes them into the manifest. */
export interface Planned {
  plan: RunPlan;
  costing: PlanCosting;
  /** The sizes applied: by this run (`--right-size`) or by the run it reproduces. */
  rightSized?: RightSized;
  /** A site of several clusters: where the run goes and why (place.ts). */
  placement?: Placement;
}

/** What a command sets of the run: the hooks it fills. */
export interface RunCommand {
  /** Stop after the preflight: no runs lock, no check of active runs, nothing queued (`plan`, `--dry-run`). */
  dryRun: boolean;
  /** Called with the loaded spec: refuse a spec the command cannot run, or say what it ignores; tune: its study. */
  studyOf?: (spec: Spec, log: (line: string) => void) => StudyHooks | undefined;
}

/** `tune`: the spec's tune: stage planned as one array of study workers, and the study's files. */
export interface StudyHooks {
  tune: ResolvedTune;
  /** Guard: refuse a study name that is taken. */
  guard(site: Site): void;
  /** Record: study.json beside the scripts (of `spec`, as sized); the study's name and directory. */
  write(spec: Spec, outDir: string, runDir: string): { name: string; dir: string };
  /** After the submit: the name points at the run's study. */
  submitted(site: Site, record: RunRecord): void;
}

/** What train, plan and tune made: the run, its plan and preflight verdicts, and what they printed. */
export interface RunResult {
  /** Where the run's files are (a plan of a site not provisioned: under .hpc/plans/). */
  runDir: string;
  manifest: Manifest;
  /** The run's record (its manifest's one writer). */
  record: RunRecord;
  plan: RunPlan;
  preflight: PreflightReport[];
  scheduler: Scheduler;
  /** With --from-manifest: the scripts re-rendered for the recorded run dir vs the recorded hashes. */
  reproduction?: Reproduction;
  /** A tune run's study: its name and directory. */
  study?: { name: string; dir: string };
  /** Cost, sizes from history and balance, as printed before anything was queued. */
  costing?: PlanCosting;
}

/** Where a command prints: its output and its error stream. */
export interface Io {
  out: Output;
  err: NodeJS.WritableStream;
}

/** A run as a command reads it: its record, and its manifest with paths where its files are here. */
export interface OpenedRun {
  record: RunRecord;
  /** The manifest with every path under the run dir pointing into the local copy (a site over SSH). */
  view: Manifest;
}
