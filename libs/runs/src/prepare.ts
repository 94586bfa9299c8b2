// Phase 1, prepare: the spec loaded (from --spec, a recorded run, or with a study's best trial),
// the command's say on it (tune: its study), the stack's site checked, the scheduler chosen and
// the jobs planned (stages → jobs; sweeps → arrays chunked under MaxArraySize; the study variant).
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { checkSpecAgainstSite, type CacheIdentity, loadExperimentSpec } from '@kdgat/config';
import {
  applyBestTrial,
  checkEnvironmentMatches,
  isDeclaredOnly,
  readSpecFile,
  readStackOrDeclared,
  resolveStudyDir,
  stackFileLabel,
  type FromStudy,
  type StackOutputs,
} from '@kdgat/planning';
import {
  COPY_EXCLUDES,
  MANIFEST_FILE,
  compareRecordedLocks,
  copyLine,
  materializeGitCode,
  readManifest,
  refreshCopy,
  resolveStageInputs,
  type Manifest,
  type ResolvedInput,
  type SiteCopies,
} from '@kdgat/run-record';
import { UnprovisionedSlurm, schedulerFor, type Scheduler } from '@kdgat/schedulers';
import { SiteFiles, sessionFor } from '@kdgat/transport';
import { planJobs } from './jobs.ts';
import { configsOf, localRunsRoot } from './paths.ts';
import { clusterScheduler, place } from './place.ts';
import type { Prepared, RunCommand, RunOptions, Site, Spec } from './types.ts';

/**
 * Prepare: load spec → the command's hook (tune: its study; train, plan: the tune: section
 * ignored) → the loader's warnings → check stack → scheduler → plan the jobs. Nothing is written.
 */
export async function prepare(
  opts: RunOptions,
  command: RunCommand,
  log: (line: string) => void,
): Promise<Prepared> {
  const loaded = await withPipelineCode(await loadSpec(opts, log), opts, log);
  const study = command.studyOf?.(loaded, log);
  logWarnings(loaded, log);
  const site = await checkStack(loaded, { ...opts, dryRun: command.dryRun }, log);
  const { spec, placement } = await place(loaded, site, { ...opts, dryRun: command.dryRun }, log);
  // One of the site's other clusters: its commands name it with -M; the spec's own, as ever.
  const scheduler = placement?.via
    ? clusterScheduler(site, placement.via, opts)
    : schedulerOf(spec, site, opts);
  const plan = await planJobs(spec, scheduler, study);
  return { spec, site, scheduler, plan, ...(study ? { study } : {}), ...(placement ? { placement } : {}) };
}

/** A pipeline whose code is a git repository at a commit: that commit, cloned once, is its code dir. */
async function withPipelineCode(spec: Spec, opts: RunOptions, log: (line: string) => void): Promise<Spec> {
  const pipeline = spec.resolved.pipeline;
  if (!pipeline.codeGit || pipeline.codeDir) return spec;
  const codeDir = await materializeGitCode(
    configsOf(opts).workspace.root,
    pipeline.name,
    pipeline.codeGit,
    log,
  );
  return { ...spec, resolved: { ...spec.resolved, pipeline: { ...pipeline, codeDir } } };
}

/** Load spec: from `--spec`, or the one a manifest recorded; the best trial applied; validated. */
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
  const dir = resolveStudyDir(study, localRunsRoot(configsOf(opts).workspace, stackName));
  const runDir = dirname(dir);
  if (existsSync(join(runDir, MANIFEST_FILE))) {
    const manifest = readManifest(runDir);
    log(copyLine(manifest, runDir, await refreshCopy(manifest, runDir)));
  }
  return dir;
}

/** The loader's warnings (the spec's overrides and sweep points were checked by the loader). */
export function logWarnings(spec: Spec, log: (line: string) => void): void {
  for (const w of spec.loaded.warnings ?? [])
    log(`warning: ${typeof w === 'string' ? w : JSON.stringify(w)}`);
}

function stackNameOf(opts: RunOptions, source?: Manifest): string {
  return opts.stack ?? source?.stack.name ?? 'local';
}

/**
 * Check stack: its outputs (predicted from the declaration for a plan of a site not
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
    resolved.environments,
    declaredIn,
    stackFileLabel(configsOf(opts), name),
  );
  checkSpecAgainstSite(spec.loaded, { stack: name, cacheDirs: outputs.scratch.cacheDirs });
  const envChanges = source ? compareRecordedLocks(source, outputs, opts.allowEnvChange === true) : undefined;
  for (const [env, change] of Object.entries(envChanges ?? {})) {
    log(
      `the environment ${env} changed since the recorded run (--allow-env-change); packages that differ (recorded -> now):`,
    );
    for (const d of change.differences) log(`  ${d}`);
  }
  const connection = outputs.connection;
  // A provisioned site over SSH: runs are written here first (a local copy), then put on the site.
  const remote = connection.kind === 'ssh' && !isDeclaredOnly(outputs);
  const runsRoot = remote ? localRunsRoot(configsOf(opts).workspace, name) : outputs.scratch.runsDir;
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
    ...(envChanges && Object.keys(envChanges).length > 0 ? { envChanges } : {}),
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
