// The steps `train`, `plan` and `tune` are made of, in the order they run: load spec → check
// stack → plan → render → guard → record → preflight → submit. Each is wiring over the libraries
// (@kdgat/config, planning, run-record, schedulers) plus the lines it prints.
import { existsSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import {
  checkSpecAgainstSite,
  type CacheIdentity,
  type Connection,
  environmentSpecHash,
  loadExperimentSpec,
  type LoadedSpec,
  type ResolvedExperiment,
  type ResolvedTune,
} from '@kdgat/config';
import {
  PreflightError,
  applyBestTrial,
  applyRecordedSizes,
  asStudyPlan,
  buildPlan,
  checkEnvironmentMatches,
  checkOverrides,
  costPlan,
  isDeclaredOnly,
  preflightPlan,
  readSpecFile,
  readStackOrDeclared,
  renderPlan,
  resolveStudyDir,
  submitPlan,
  writeRendered,
  type FromStudy,
  type PlanCosting,
  type PreflightReport,
  type RenderedJob,
  type RunPlan,
  type StackOutputs,
  type StackOutputsSource,
} from '@kdgat/planning';
import {
  CODE_DIFF_FILE,
  COPY_EXCLUDES,
  MANIFEST_FILE,
  RunRecord,
  codeSnapshot,
  compareRecordedLock,
  copyLine,
  refreshCopy,
  snapshotDir,
  uploadSnapshot,
  reproductionOf,
  copyLockIntoRun,
  gitInfo,
  linkStageInputs,
  newManifest,
  newRunDir,
  readManifest,
  resolveStageInputs,
  type Manifest,
  type ResolvedInput,
  type SiteCopies,
} from '@kdgat/run-record';
import { UnprovisionedSlurm, schedulerFor, type Scheduler } from '@kdgat/schedulers';
import { jobNameFor } from '@kdgat/slurm-templates';
import { SiteFiles, sessionFor } from '@kdgat/transport';

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
  /** For tests and bench: a scheduler to use instead of constructing one. */
  schedulerInstance?: Scheduler;
  force?: boolean;
  /** Apply the requests sized from history (`train --right-size`); recorded in the manifest. */
  rightSize?: boolean;
  /** A site over SSH: send python/ with uncommitted changes (the diff is kept with the run). */
  allowDirty?: boolean;
  repoRoot: string;
  log?: (line: string) => void;
}

export class SubmissionFailedError extends Error {
  readonly runDir: string;
  constructor(message: string, runDir: string) {
    super(message);
    this.name = 'SubmissionFailedError';
    this.runDir = runDir;
  }
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

/** 1. Load spec: from `--spec`, or the one a manifest recorded; the best trial applied; validated. */
export async function loadSpec(opts: RunOptions, log: (line: string) => void): Promise<Spec> {
  let source: Manifest | undefined;
  let spec: { file: string; text: string };
  if (opts.fromManifest) {
    source = readManifest(resolve(opts.fromManifest));
    spec = { file: source.spec.file, text: source.spec.text };
  } else if (opts.specPath) spec = readSpecFile(opts.specPath);
  else throw new Error('train needs --spec <file.yaml> or --from-manifest <run dir|manifest.json>');
  let fromStudy: FromStudy | undefined;
  if (opts.fromStudy) {
    const name = stackNameOf(opts, source);
    const stack = await opts.stackSource.read(name);
    const applied = await applyBestTrial(
      spec.text,
      spec.file,
      await studyHere(opts.fromStudy, name, stack, opts, log),
      stack,
    );
    spec = { ...spec, text: applied.text };
    fromStudy = applied.provenance;
    const values = Object.entries(fromStudy.params).map(([k, v]) => `${k}=${String(v)}`);
    log(
      `best trial ${fromStudy.trial} of study ${fromStudy.study}: ${fromStudy.metric} = ${fromStudy.value}; stage ${fromStudy.stageId} trains with ${values.join(', ')}`,
    );
  }
  const loaded = loadExperimentSpec({ text: spec.text, file: spec.file });
  return {
    ...spec,
    loaded,
    resolved: loaded.resolved,
    ...(source ? { source } : {}),
    ...(fromStudy ? { fromStudy } : {}),
  };
}

/**
 * The study a `--from-study` names, where this machine reads it: as given for a local site; for a
 * site over SSH, in the local copy of its run (the name looked up there), brought back first.
 */
async function studyHere(
  study: string,
  stackName: string,
  stack: StackOutputs,
  opts: RunOptions,
  log: (line: string) => void,
): Promise<string> {
  if (stack.connection.kind !== 'ssh') return study;
  const dir = resolveStudyDir(study, localRunsRoot(opts.repoRoot, stackName));
  const runDir = dirname(dir);
  if (existsSync(join(runDir, MANIFEST_FILE))) {
    const manifest = readManifest(runDir);
    log(copyLine(manifest, runDir, await refreshCopy(manifest, runDir)));
  }
  return dir;
}

/** `--overrides` and every sweep point against the pipeline schema; the loader's warnings. */
export function checkSpec(spec: Spec, log: (line: string) => void): void {
  checkOverrides(spec.resolved);
  for (const w of spec.loaded.warnings ?? [])
    log(`warning: ${typeof w === 'string' ? w : JSON.stringify(w)}`);
}

function stackNameOf(opts: RunOptions, source?: Manifest): string {
  return opts.stack ?? source?.stack.name ?? 'local';
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
  envChange?: { changed: boolean; differences: string[] };
  inputs: ResolvedInput[];
}

/**
 * 2. Check stack: its outputs (predicted from the declaration for a plan of a site not
 * provisioned), its environment against the spec's, the spec's datasets against its caches, the
 * environment's lock against a reproduced run's, and the stage inputs from earlier runs.
 */
export async function checkStack(
  spec: Spec,
  opts: RunOptions & { dryRun?: boolean },
  log: (line: string) => void,
): Promise<Site> {
  const { resolved, source } = spec;
  const name = stackNameOf(opts, source);
  const { outputs, source: from } = await readStackOrDeclared(opts.stackSource, name, {
    dryRun: opts.dryRun === true,
    ...(opts.declaredSource ? { declared: opts.declaredSource } : {}),
    log,
  });
  const declaredIn = isDeclaredOnly(outputs) ? outputs.declared.file : undefined;
  checkEnvironmentMatches(
    name,
    outputs,
    resolved.environment.name,
    environmentSpecHash(resolved.environment),
    declaredIn,
  );
  checkSpecAgainstSite(spec.loaded, { stack: name, cacheDirs: outputs.scratch.cacheDirs });
  const envChange = source ? compareRecordedLock(source, outputs, opts.allowEnvChange === true) : undefined;
  if (envChange?.changed) {
    log(
      `the environment changed since the recorded run (--allow-env-change); packages that differ (recorded -> now):`,
    );
    for (const d of envChange.differences) log(`  ${d}`);
  }
  const connection = outputs.connection;
  // A provisioned site over SSH: runs are written here first (a local copy), then put on the site.
  const remote = connection.kind === 'ssh' && !isDeclaredOnly(outputs);
  const runsRoot = remote ? localRunsRoot(opts.repoRoot, name) : outputs.scratch.runsDir;
  const files = remote ? new SiteFiles(sessionFor(connection)) : undefined;
  const copies = files ? await siteCopies(spec, outputs, files, runsRoot) : undefined;
  const inputs = stageInputs(spec, name, outputs, log, copies);
  return {
    name,
    outputs,
    source: from,
    connection,
    runsRoot,
    ...(files ? { files } : {}),
    inputs,
    ...(envChange ? { envChange } : {}),
  };
}

/**
 * A site over SSH whose stages read earlier runs: those runs brought back into this machine's copy
 * (one rsync per experiment or run named; checkpoints left on the site) and the meta of the site's
 * graph caches the stages use, for resolveStageInputs to read here.
 */
async function siteCopies(
  spec: Spec,
  outputs: StackOutputs,
  files: SiteFiles,
  runsRoot: string,
): Promise<SiteCopies | undefined> {
  const stages = spec.resolved.stages.filter((s) => (s.inputs ?? []).length > 0);
  if (stages.length === 0) return undefined;
  const siteRuns = outputs.scratch.runsDir.replace(/\/+$/, '');
  const pinned = (spec.source?.inputs ?? []).map((i) => i.runDir);
  const named = stages.flatMap((s) => (s.inputs ?? []).map((i) => i.run));
  for (const run of new Set([...named, ...pinned])) {
    const dir = run.startsWith('/')
      ? run.replace(/\/manifest\.json$/, '')
      : `${siteRuns}/${run.replace(/\/manifest\.json$/, '')}`;
    if (!dir.startsWith(`${siteRuns}/`)) continue; // not under the site's runs: reported by the check
    if (!(await files.exists(dir))) continue; // no such run on the site: reported by the check
    await files.pull(dir, runsRoot + dir.slice(siteRuns.length), COPY_EXCLUDES);
  }
  const cacheMeta: Record<string, CacheIdentity | undefined> = {};
  for (const dataset of new Set(stages.map((s) => s.dataset))) {
    const dir = outputs.scratch.cacheDirs[dataset];
    const r = dir ? await files.session.run(['cat', `${dir}/meta.json`], { timeoutSeconds: 60 }) : undefined;
    try {
      cacheMeta[dataset] = r?.code === 0 ? (JSON.parse(r.stdout) as CacheIdentity) : undefined;
    } catch {
      cacheMeta[dataset] = undefined;
    }
  }
  return { runsRoot, cacheMeta };
}

/** Where this machine keeps its copies of a remote site's runs. */
export function localRunsRoot(repoRoot: string, stack: string): string {
  return join(repoRoot, '.hpc', 'sites', stack, 'runs');
}

/** The site's path of a run whose local directory is `localRunDir`. */
export function siteRunDirOf(site: Site, localRunDir: string): string {
  return site.files
    ? `${site.outputs.scratch.runsDir.replace(/\/+$/, '')}/${relative(site.runsRoot, localRunDir)}`
    : localRunDir;
}

/** Where the code snapshots of a site are kept: beside its runs, on its scratch. */
function codeRootOf(outputs: StackOutputs): string {
  return `${outputs.scratch.root.replace(/\/+$/, '')}/code`;
}

/**
 * A site over SSH: the snapshot of python/ the jobs import, put on the site unless it is there
 * already. Refuses a dirty tree unless --allow-dirty. A local site runs the environment's pipeline.
 */
export async function shipCode(
  site: Site,
  opts: RunOptions,
  log: (line: string) => void,
): Promise<{ recorded: NonNullable<Manifest['code']>; diff?: string } | undefined> {
  if (!site.files) return undefined;
  const snapshot = await codeSnapshot(opts.repoRoot, { allowDirty: opts.allowDirty === true });
  const dir = snapshotDir(codeRootOf(site.outputs), snapshot);
  const uploaded = await uploadSnapshot(opts.repoRoot, snapshot, site.files, codeRootOf(site.outputs));
  log(
    `code: python/ at ${snapshot.commit.slice(0, 12)}${snapshot.dirty ? ' with uncommitted changes (--allow-dirty)' : ''}, ` +
      `tree ${snapshot.tree.slice(0, 12)} ${uploaded ? 'uploaded to' : 'already on the site at'} ${dir}`,
  );
  const { tree, commit, dirty, diff } = snapshot;
  return diff === undefined
    ? { recorded: { tree, commit, dir, dirty } }
    : { recorded: { tree, commit, dir, dirty, diffFile: CODE_DIFF_FILE }, diff };
}

/**
 * Outputs of earlier runs the stages read, found and checked before anything is written or queued.
 * A reproduction reads the very runs its manifest recorded; a site not provisioned has none here yet.
 */
function stageInputs(
  spec: Spec,
  stack: string,
  outputs: StackOutputs,
  log: (line: string) => void,
  copies?: SiteCopies,
): ResolvedInput[] {
  const { resolved, source } = spec;
  if (isDeclaredOnly(outputs)) {
    for (const st of resolved.stages)
      for (const i of st.inputs ?? [])
        log(
          `stage ${st.id} reads ${i.stage} of run ${i.run}: not checked (stack ${stack} is not provisioned, its runs are on the site; train checks them)`,
        );
    return [];
  }
  const pins = new Map((source?.inputs ?? []).map((i) => [`${i.stageId}#${i.stage}`, i.runDir]));
  const inputs = resolveStageInputs(resolved, outputs, pins, copies);
  for (const i of inputs)
    log(
      `stage ${i.stageId} reads ${i.stage} of run ${i.runDir} (${i.dir}; graph cache ${i.graphCache.params_digest.slice(0, 12)})`,
    );
  return inputs;
}

/** The scheduler the run goes to: the flag, else the reproduced run's, else the cluster profile's. */
export function schedulerOf(spec: Spec, site: Site, opts: RunOptions): Scheduler {
  if (opts.schedulerInstance) return opts.schedulerInstance;
  const kind = opts.scheduler ?? spec.source?.scheduler ?? spec.resolved.cluster.scheduler;
  return isDeclaredOnly(site.outputs) && kind === 'slurm'
    ? new UnprovisionedSlurm(site.name)
    : schedulerFor(kind, site.runsRoot, site.files ? site.connection : { kind: 'local' });
}

export interface Planned {
  plan: RunPlan;
  costing: PlanCosting;
  rightSized?: Manifest['rightSized'];
}

/** 3. Plan: jobs, arrays chunked to the scheduler's MaxArraySize, the study variant; cost and sizes. */
export async function planRun(
  spec: Spec,
  site: Site,
  scheduler: Scheduler,
  opts: { tune?: ResolvedTune; rightSize?: boolean },
  log: (line: string) => void,
): Promise<Planned> {
  const { resolved, source } = spec;
  const experiment = resolved.spec.name;
  const plan = buildPlan({
    experiment,
    specHash: resolved.specHash,
    stages: resolved.stages,
    sweepPoints: resolved.sweepPoints,
    maxArraySize: (await scheduler.limits()).maxArraySize,
    jobName: (stageId) => jobNameFor(experiment, stageId),
  });
  if (opts.tune) asStudyPlan(plan, opts.tune);
  applyRecordedSizes(resolved, source?.rightSized);
  const costing = await costPlan({
    resolved,
    plan,
    runsRoot: site.runsRoot,
    apply: opts.rightSize === true && !source,
    ...(site.files ? { executor: site.files.session } : {}),
  });
  for (const line of costing.lines) log(line);
  const rightSized = source?.rightSized ?? costing.rightSized;
  return { plan, costing, ...(rightSized ? { rightSized } : {}) };
}

/** 4. Render every script for `runDir` (the site's path; scripts carry absolute paths). */
export function render(
  spec: Spec,
  site: Site,
  planned: Planned,
  scheduler: Scheduler,
  runDir: string,
  code?: string,
): RenderedJob[] {
  return renderPlan(planned.plan, spec.resolved, site.outputs, runDir, scheduler.kind, code);
}

/** `--from-manifest`: rendered for the recorded run dir, the scripts must be the recorded bytes. */
export function reproduce(
  spec: Spec,
  site: Site,
  planned: Planned,
  scheduler: Scheduler,
): RunResult['reproduction'] {
  const source = spec.source;
  return (
    source && reproductionOf(source, render(spec, site, planned, scheduler, source.runDir, source.code?.dir))
  );
}

/**
 * Writes the rendered run into its directory, with the stage inputs linked and the environment's
 * lock copied. A plan against a site that is not provisioned is written into the checkout (the
 * site's scratch does not exist yet); returns where the files went.
 */
export function writeRun(
  site: Site,
  runDir: string,
  rendered: readonly RenderedJob[],
  repoRoot: string,
  log: (line: string) => void,
  code?: { diff?: string },
): { outDir: string; lockFile?: string } {
  const outDir = isDeclaredOnly(site.outputs)
    ? join(repoRoot, '.hpc', 'plans', site.name, basename(dirname(runDir)), basename(runDir))
    : site.files
      ? join(site.runsRoot, relative(site.outputs.scratch.runsDir, runDir))
      : runDir;
  writeRendered(outDir, rendered);
  if (code?.diff !== undefined) writeFileSync(join(outDir, CODE_DIFF_FILE), code.diff);
  linkStageInputs(outDir, site.inputs);
  const lockCopy = copyLockIntoRun(outDir, site.outputs);
  if (lockCopy.note && !isDeclaredOnly(site.outputs)) log(`note: ${lockCopy.note}`);
  return { outDir, ...(lockCopy.file ? { lockFile: lockCopy.file } : {}) };
}

/** 6. Record: the run's manifest, status `planned`, before anything is preflighted or queued. */
export async function recordRun(
  spec: Spec,
  site: Site,
  planned: Planned,
  written: { outDir: string; lockFile?: string },
  run: {
    runDir: string;
    rendered: readonly RenderedJob[];
    scheduler: Scheduler;
    study?: { name: string; dir: string };
    code?: Manifest['code'];
  },
  opts: RunOptions,
): Promise<RunRecord> {
  const manifest = newManifest({
    runDir: run.runDir,
    spec: { file: spec.file, text: spec.text, warnings: spec.loaded.warnings ?? [] },
    resolved: spec.resolved,
    plan: planned.plan,
    rendered: run.rendered,
    stack: { name: site.name, source: site.source.description, outputs: site.outputs },
    scheduler: run.scheduler.kind,
    git: await gitInfo(opts.repoRoot),
    ...(run.code ? { code: run.code } : {}),
    ...(written.lockFile ? { lockFile: written.lockFile } : {}),
    ...(spec.source ? { source: spec.source } : {}),
    ...(site.envChange ? { envChange: site.envChange } : {}),
    inputs: site.inputs,
    ...(run.study ? { study: run.study } : {}),
    ...(spec.fromStudy ? { fromStudy: spec.fromStudy } : {}),
    costing: planned.costing,
    ...(planned.rightSized ? { rightSized: planned.rightSized } : {}),
    forced: opts.force === true,
  });
  (opts.log ?? (() => {}))(`rendered ${run.rendered.length} script(s) into ${written.outDir}`);
  return RunRecord.create(written.outDir, manifest);
}

/**
 * A site over SSH: the run dir goes onto the site whole (scripts, sweep tables, the lock, the
 * manifest), and from then on every change to the manifest is written there too.
 */
export async function publishRun(site: Site, record: RunRecord, log: (line: string) => void): Promise<void> {
  if (!site.files) return;
  const files = site.files;
  const runDir = record.manifest.runDir;
  if (!(await files.putTree(record.dir, runDir)))
    throw new Error(`run directory ${runDir} exists on the site already; nothing was submitted`);
  record.publishTo((text) => files.putFile(join(runDir, MANIFEST_FILE), text));
  log(`run directory on the site: ${files.session.target}:${runDir}`);
}

/** 7. Preflight: `sbatch --test-only` (local: `bash -n`, CPUs) of every script; a refusal is recorded. */
export async function preflight(
  record: RunRecord,
  rendered: readonly RenderedJob[],
  scheduler: Scheduler,
  site?: Site,
): Promise<PreflightReport[]> {
  // The scripts are read where the scheduler runs: on the site, or in the local directory.
  const dir = site?.files ? record.manifest.runDir : record.dir;
  const reports = await preflightPlan(rendered, dir, scheduler);
  if (reports.some((r) => !r.ok)) {
    const err = new PreflightError(reports);
    record.refused(err.message);
    throw err;
  }
  return reports;
}

/** 8. Submit in dependency order; on a failure the parts already queued are cancelled and recorded. */
export async function submit(
  record: RunRecord,
  rendered: readonly RenderedJob[],
  scheduler: Scheduler,
): Promise<void> {
  const runDir = record.manifest.runDir;
  const submitted = await submitPlan(rendered, runDir, scheduler);
  if (!submitted.error) {
    record.submitted(submitted.jobIds);
    await record.published();
    return;
  }
  const cancelled = submitted.cancelledAfterFailure ?? [];
  record.submitted(submitted.jobIds, { error: submitted.error, cancelled });
  await record.published();
  throw new SubmissionFailedError(
    `${submitted.error}\n  already queued parts cancelled: ${cancelled.join(', ') || 'none'}; see ${record.path}`,
    runDir,
  );
}

/**
 * 4–6 for a new run: its directory (a local copy for a site over SSH), the code it imports there,
 * its scripts rendered and written, `extra` (tune: the study file) and the record; on a site over
 * SSH the run dir is then put on the site whole. Nothing is queued.
 */
export async function newRun(
  spec: Spec,
  site: Site,
  planned: Planned,
  scheduler: Scheduler,
  opts: RunOptions,
  log: (line: string) => void,
  extra?: (outDir: string, runDir: string) => { study?: { name: string; dir: string } },
): Promise<{ record: RunRecord; rendered: RenderedJob[]; study?: { name: string; dir: string } }> {
  const { name: experiment } = spec.resolved.spec;
  const runDir = siteRunDirOf(site, newRunDir(site.runsRoot, experiment, spec.resolved.specHash));
  const code = await shipCode(site, opts, log);
  const rendered = render(spec, site, planned, scheduler, runDir, code?.recorded.dir);
  const written = writeRun(site, runDir, rendered, opts.repoRoot, log, code);
  const { study } = extra?.(written.outDir, runDir) ?? {};
  const run = {
    runDir,
    rendered,
    scheduler,
    ...(study ? { study } : {}),
    ...(code ? { code: code.recorded } : {}),
  };
  const record = await recordRun(spec, site, planned, written, run, opts);
  await publishRun(site, record, log);
  return { record, rendered, ...(study ? { study } : {}) };
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
  reproduction?: { identical: boolean; differing: string[] };
  /** A tune run's study: its name and directory. */
  study?: { name: string; dir: string };
  /** Cost, sizes from history and balance, as printed before anything was queued. */
  costing?: PlanCosting;
}

export function resultOf(
  record: RunRecord,
  planned: Planned,
  preflight: PreflightReport[],
  scheduler: Scheduler,
  extra: Pick<RunResult, 'reproduction' | 'study'>,
): RunResult {
  return {
    runDir: record.dir,
    manifest: record.manifest,
    record,
    plan: planned.plan,
    preflight,
    scheduler,
    costing: planned.costing,
    ...(extra.reproduction ? { reproduction: extra.reproduction } : {}),
    ...(extra.study ? { study: extra.study } : {}),
  };
}
