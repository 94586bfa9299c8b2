// Phase 5, record: the run's directory (a local copy for a site over SSH), the code it imports,
// its scripts rendered and written, the study file (tune), and `manifest.json` (status `planned`,
// through RunRecord, its one writer); on a site over SSH the run dir is then put on the site whole.
// Also the reproduction check of `--from-manifest` (the scripts re-rendered for the recorded dir).
import { writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { isDeclaredOnly, jobLibraryNote, renderPlan, writeRendered, type RenderedJob } from '@kdgat/planning';
import {
  CODE_DIFF_FILE,
  MANIFEST_FILE,
  RunRecord,
  codeSnapshot,
  codeSourceOf,
  copyLocksIntoRun,
  gitInfo,
  linkStageInputs,
  newManifest,
  newRunDir,
  reproductionOf,
  snapshotDir,
  uploadSnapshot,
  type Manifest,
} from '@kdgat/run-record';
import {
  codeRootFor,
  ensureHpcDir,
  siteUserOf,
  type Pipeline,
  type ResolvedExperiment,
  type Workspace,
} from '@kdgat/config';
import type { Scheduler } from '@kdgat/schedulers';
import { configsOf, siteRunDirOf } from './paths.ts';
import type { Planned, RunOptions, RunResult, Site, Spec, StudyHooks } from './types.ts';

/**
 * Record: a new run's directory (a local copy for a site over SSH), the code it imports there, its
 * scripts rendered and written, the study file (tune), and the manifest; on a site over SSH the run
 * dir is then put on the site whole. Nothing is queued.
 */
export async function newRun(
  spec: Spec,
  site: Site,
  planned: Planned,
  scheduler: Scheduler,
  opts: RunOptions,
  log: (line: string) => void,
  studyHooks?: StudyHooks,
): Promise<{ record: RunRecord; rendered: RenderedJob[]; study?: { name: string; dir: string } }> {
  const { name: experiment } = spec.resolved.spec;
  const runDir = siteRunDirOf(site, newRunDir(site.runsRoot, experiment, spec.resolved.specHash));
  const code = await shipCode(site, opts, log, spec.resolved.pipeline);
  const rendered = render(spec, site, planned, scheduler, runDir, code?.recorded.dir);
  const note = rendered[0] && jobLibraryNote(site.outputs, rendered[0].library, site.name);
  if (note && !isDeclaredOnly(site.outputs)) log(`note: ${note}`);
  const written = writeRun(site, spec.resolved, runDir, rendered, configsOf(opts).workspace, log, code);
  const study = studyHooks?.write(spec, written.outDir, runDir);
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

/**
 * A site over SSH: the snapshot of the pipeline's code (python/ for the default pipeline) the jobs import, put on the site unless it is there
 * already. Refuses a dirty tree unless --allow-dirty. A local site runs the environment's pipeline.
 */
export async function shipCode(
  site: Site,
  opts: RunOptions,
  log: (line: string) => void,
  /** The run's pipeline: its declared code travels instead of the default pipeline's python/. */
  pipeline?: Pick<Pipeline, 'codeDir'>,
): Promise<{ recorded: NonNullable<Manifest['code']>; diff?: string } | undefined> {
  if (!site.files) return undefined;
  const source = await codeSourceOf(opts.repoRoot, pipeline?.codeDir);
  const snapshot = await codeSnapshot(source, { allowDirty: opts.allowDirty === true });
  // The site user's own code root (mode 700, checked): nobody else can plant a tree in it.
  const codeRoot = codeRootFor(site.outputs.scratch.root, siteUserOf(site.connection));
  const dir = snapshotDir(codeRoot, snapshot);
  await site.files.ensurePrivateDir(codeRoot);
  const uploaded = await uploadSnapshot(source.repo, snapshot, site.files, codeRoot);
  log(
    `code: ${source.path === '.' ? source.repo : `${source.path}/`} at ${snapshot.commit.slice(0, 12)}${snapshot.dirty ? ' with uncommitted changes (--allow-dirty)' : ''}, ` +
      `tree ${snapshot.tree.slice(0, 12)} ${uploaded ? 'uploaded to' : 'already on the site at'} ${dir}`,
  );
  const { tree, commit, dirty, diff } = snapshot;
  return diff === undefined
    ? { recorded: { tree, commit, dir, dirty } }
    : { recorded: { tree, commit, dir, dirty, diffFile: CODE_DIFF_FILE }, diff };
}

/** Render every script for `runDir` (the site's path; scripts carry absolute paths). */
export function render(
  spec: Spec,
  site: Site,
  planned: Planned,
  scheduler: Scheduler,
  runDir: string,
  code?: string,
): RenderedJob[] {
  // A reproduction loads the site's copy of the job library its run loaded, where it is this version.
  const recorded = spec.source?.jobLibrary;
  return renderPlan(planned.plan, spec.resolved, site.outputs, runDir, scheduler.kind, code, {
    stack: site.name,
    ...(recorded ? { recorded } : {}),
  });
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
  resolved: ResolvedExperiment,
  runDir: string,
  rendered: readonly RenderedJob[],
  workspace: Workspace,
  log: (line: string) => void,
  code?: { diff?: string },
): { outDir: string; lockFiles: Record<string, string> } {
  const outDir = isDeclaredOnly(site.outputs)
    ? join(ensureHpcDir(workspace), 'plans', site.name, basename(dirname(runDir)), basename(runDir))
    : site.files
      ? join(site.runsRoot, relative(site.outputs.scratch.runsDir, runDir))
      : runDir;
  writeRendered(outDir, rendered);
  if (code?.diff !== undefined) writeFileSync(join(outDir, CODE_DIFF_FILE), code.diff);
  linkStageInputs(outDir, site.inputs);
  const locks = copyLocksIntoRun(outDir, site.outputs, resolved);
  if (!isDeclaredOnly(site.outputs)) for (const note of locks.notes) log(`note: ${note}`);
  return { outDir, lockFiles: locks.files };
}

/** The run's manifest, status `planned`, before anything is preflighted or queued. */
export async function recordRun(
  spec: Spec,
  site: Site,
  planned: Planned,
  written: { outDir: string; lockFiles: Record<string, string> },
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
    lockFiles: written.lockFiles,
    ...(spec.source ? { source: spec.source } : {}),
    ...(site.envChanges ? { envChanges: site.envChanges } : {}),
    inputs: site.inputs,
    ...(run.study ? { study: run.study } : {}),
    ...(spec.fromStudy ? { fromStudy: spec.fromStudy } : {}),
    ...(planned.placement ? { placement: planned.placement } : {}),
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
