// The train/plan flow: load + validate the spec → stack outputs → plan → render into the run
// dir → preflight → (lock, idempotency check, atomic submit) → manifest.json.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import {
  checkSpecAgainstSite,
  environmentSpecHash,
  loadExperimentSpec,
  parseYaml,
  validateOverrides,
  type ResolvedExperiment,
} from '@kdgat/config';
import { buildPlan, type RunPlan } from '../plan/build.ts';
import { renderPlan, type RenderedJob } from '../plan/render.ts';
import { jobNameFor } from '@kdgat/slurm-templates';
import {
  gitInfo,
  readManifest,
  sha256,
  writeManifest,
  MANIFEST_FILE,
  MANIFEST_VERSION,
  type Manifest,
  type Scalar,
} from '../manifest/manifest.ts';
import { isActive, type Scheduler } from '../schedulers/core.ts';
import { LocalScheduler } from '../schedulers/local/index.ts';
import { SlurmScheduler } from '../schedulers/slurm/index.ts';
import { checkEnvironmentMatches, type StackOutputs, type StackOutputsSource } from '../stack/outputs.ts';
import { UnprovisionedSlurm, isDeclaredOnly, readStackOrDeclared } from '../stack/declared.ts';
import { compareRecordedLock, copyLockIntoRun } from './environment-lock.ts';
import {
  existingStudy,
  resolveStudyDir,
  runTuneReport,
  studyConfig,
  studyLink,
  STUDY_FILE,
} from '../tune/study.ts';
import { linkStageInputs, resolveStageInputs } from '../inputs/inputs.ts';
import { acquireLock } from './lock.ts';
import { costPlan, costRecord, type PlanCosting } from '../cost/plan-cost.ts';
import { PreflightError, preflightPlan, submitPlan, type PreflightReport } from './submit.ts';

export interface TrainOptions {
  specPath?: string;
  fromManifest?: string;
  stack?: string;
  stackSource: StackOutputsSource;
  /** `plan` of a stack that is not provisioned: its outputs predicted from the declared config. */
  declaredSource?: StackOutputsSource;
  /** `--from-manifest`: run even though the environment's lock changed since the recorded run. */
  allowEnvChange?: boolean;
  scheduler?: 'slurm' | 'local';
  force?: boolean;
  dryRun?: boolean;
  repoRoot: string;
  log?: (line: string) => void;
  /** For tests and bench: a scheduler to use instead of constructing one. */
  schedulerInstance?: Scheduler;
  /** `tune`: the spec's `tune:` stage runs as a study's worker array (`nx run runner:tune`). */
  mode?: 'train' | 'tune';
  /** A study name or directory: train its best trial's values (`train --from-study S --best`). */
  fromStudy?: string;
  /** Apply the requests sized from history (`train --right-size`); recorded in the manifest. */
  rightSize?: boolean;
}

export interface TrainResult {
  runDir: string;
  manifest: Manifest;
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

export class StudyExistsError extends Error {
  constructor(study: string, where: string) {
    super(
      `study ${study} already exists (${where}): choose another tune.study, or see it with \`nx run runner:tune-report --study ${study}\``,
    );
    this.name = 'StudyExistsError';
  }
}

export class AlreadyQueuedError extends Error {
  readonly runs: { runDir: string; jobIds: string[] }[];
  constructor(hash: string, runs: { runDir: string; jobIds: string[] }[]) {
    super(
      `a run of this spec (hash ${hash.slice(0, 8)}) is already queued or running; not submitting again (use --force to submit anyway):\n` +
        runs.map((r) => `  ${r.runDir}: job ids ${r.jobIds.join(', ')}`).join('\n'),
    );
    this.name = 'AlreadyQueuedError';
    this.runs = runs;
  }
}

export class SubmissionFailedError extends Error {
  readonly runDir: string;
  constructor(message: string, runDir: string) {
    super(message);
    this.name = 'SubmissionFailedError';
    this.runDir = runDir;
  }
}

export function schedulerFor(kind: 'slurm' | 'local', runsRoot: string): Scheduler {
  return kind === 'slurm' ? new SlurmScheduler() : new LocalScheduler(join(runsRoot, '.local-scheduler'));
}

export function schedulerForManifest(manifest: Manifest): Scheduler {
  return schedulerFor(manifest.scheduler, manifest.stack.outputs.scratch.runsDir);
}

function utcStamp(d = new Date()): string {
  return d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

/** Checks stage overrides and every sweep point against the pipeline's JSON Schema. */
function checkOverrides(resolved: ResolvedExperiment): void {
  const problems: string[] = [];
  const check = (where: string, overrides: Record<string, Scalar>) => {
    const result = (validateOverrides as (o: Record<string, Scalar>, s?: unknown) => unknown)(overrides);
    const issues = Array.isArray(result)
      ? result
      : result && typeof result === 'object' && 'issues' in result
        ? (result as { issues: unknown[] }).issues
        : [];
    for (const i of issues)
      problems.push(
        `${where}: ${typeof i === 'string' ? i : ((i as { message?: string }).message ?? JSON.stringify(i))}`,
      );
  };
  for (const s of resolved.stages) {
    check(`stages.${s.id}.overrides`, s.overrides as Record<string, Scalar>);
    resolved.sweepPoints.forEach((p, i) =>
      check(`sweep point ${i} (stage ${s.id})`, {
        ...(s.overrides as Record<string, Scalar>),
        ...(p as Record<string, Scalar>),
      }),
    );
  }
  if (problems.length > 0)
    throw new Error(`overrides rejected by the pipeline schema:\n  ${problems.join('\n  ')}`);
}

/** Manifests of earlier runs of the same experiment and spec hash. */
function earlierRuns(runsRoot: string, experiment: string, specHash: string): Manifest[] {
  const dir = join(runsRoot, experiment);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((d) => d.includes(`-${specHash.slice(0, 8)}`) && existsSync(join(dir, d, MANIFEST_FILE)))
    .flatMap((d) => {
      try {
        return [readManifest(join(dir, d))];
      } catch {
        return [];
      }
    })
    .filter((m) => m.spec.hash === specHash && m.submission.status === 'submitted');
}

export async function train(opts: TrainOptions): Promise<TrainResult> {
  const log = opts.log ?? (() => {});
  let specText: string;
  let specFile: string;
  let source: Manifest | undefined;
  if (opts.fromManifest) {
    source = readManifest(resolve(opts.fromManifest));
    specText = source.spec.text;
    specFile = source.spec.file;
  } else if (opts.specPath) {
    specFile = resolve(opts.specPath);
    if (!existsSync(specFile)) throw new Error(`--spec ${opts.specPath}: no such file`);
    specText = readFileSync(specFile, 'utf8');
  } else {
    throw new Error('train needs --spec <file.yaml> or --from-manifest <run dir|manifest.json>');
  }
  const stackName = opts.stack ?? source?.stack.name ?? 'local';
  let fromStudy: Manifest['fromStudy'];
  if (opts.fromStudy) {
    const applied = await applyBestTrial(specText, specFile, opts.fromStudy, await opts.stackSource.read(stackName));
    specText = applied.text;
    fromStudy = applied.provenance;
    log(
      `best trial ${fromStudy.trial} of study ${fromStudy.study}: ${fromStudy.metric} = ${fromStudy.value}; stage ${fromStudy.stageId} trains with ${Object.entries(
        fromStudy.params,
      )
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(', ')}`,
    );
  }
  const loaded = loadExperimentSpec({ text: specText, file: specFile });
  const resolved = loaded.resolved;
  const mode = opts.mode ?? 'train';
  const tune = mode === 'tune' ? resolved.tune : undefined;
  if (mode === 'tune' && !tune)
    throw new Error(
      `${specFile} has no tune: section: add one (see examples/tune-vgae.yaml) or use \`nx run runner:train\``,
    );
  if (mode === 'train' && resolved.tune && !opts.fromStudy)
    log(`note: the spec's tune: section is ignored by train (\`nx run runner:tune\` runs the study)`);
  checkOverrides(resolved);
  for (const w of loaded.warnings ?? []) log(`warning: ${typeof w === 'string' ? w : JSON.stringify(w)}`);

  const { outputs: stack, source: stackSource } = await readStackOrDeclared(opts.stackSource, stackName, {
    dryRun: opts.dryRun === true,
    ...(opts.declaredSource ? { declared: opts.declaredSource } : {}),
    log,
  });
  checkEnvironmentMatches(
    stackName,
    stack,
    resolved.environment.name,
    environmentSpecHash(resolved.environment),
    isDeclaredOnly(stack) ? stack.declared.file : undefined,
  );
  checkSpecAgainstSite(loaded, { stack: stackName, cacheDirs: stack.scratch.cacheDirs });
  const envChange = source ? compareRecordedLock(source, stack, opts.allowEnvChange === true) : undefined;
  if (envChange?.changed) {
    log(`the environment changed since the recorded run (--allow-env-change); packages that differ (recorded -> now):`);
    for (const d of envChange.differences) log(`  ${d}`);
  }

  // Outputs of earlier runs: found and checked before anything is written or queued. A reproduction
  // reads the very runs its manifest recorded, not whatever is latest now.
  // A site that is not provisioned has no runs to read yet: say so, check them at `train`.
  const pins = new Map((source?.inputs ?? []).map((i) => [`${i.stageId}#${i.stage}`, i.runDir]));
  const inputs = isDeclaredOnly(stack) ? [] : resolveStageInputs(resolved, stack, pins);
  if (isDeclaredOnly(stack))
    for (const st of resolved.stages)
      for (const i of st.inputs ?? [])
        log(
          `stage ${st.id} reads ${i.stage} of run ${i.run}: not checked (stack ${stackName} is not provisioned, its runs are on the site; train checks them)`,
        );
  for (const i of inputs)
    log(`stage ${i.stageId} reads ${i.stage} of run ${i.runDir} (${i.dir}; graph cache ${i.graphCache.params_digest.slice(0, 12)})`);

  const runsRoot = stack.scratch.runsDir;
  const kind = opts.scheduler ?? source?.scheduler ?? resolved.cluster.scheduler;
  const scheduler =
    opts.schedulerInstance ??
    (isDeclaredOnly(stack) && kind === 'slurm' ? new UnprovisionedSlurm(stackName) : schedulerFor(kind, runsRoot));
  const experiment = resolved.spec.name;
  const plan = buildPlan({
    experiment,
    specHash: resolved.specHash,
    stages: resolved.stages,
    sweepPoints: resolved.sweepPoints as Record<string, Scalar>[],
    maxArraySize: (await scheduler.limits()).maxArraySize,
    jobName: (stageId) => jobNameFor(experiment, stageId),
  });
  if (tune) {
    // The tuned stage runs as the study's workers: one array task per worker.
    const job = plan.jobs.find((j) => j.stageId === tune.stage)!;
    job.array = { size: tune.nWorkers, concurrency: tune.nWorkers, firstPoint: 0 };
    job.tune = { workers: tune.nWorkers };
  }
  // A reproduced run keeps the sizes its source applied; otherwise history may size them now.
  for (const [id, r] of Object.entries(source?.rightSized ?? {})) {
    const stage = resolved.stages.find((s) => s.id === id);
    if (stage) stage.resources = { ...stage.resources, cpus: r.cpus, memGB: r.memGB, time: r.time };
  }
  const costing = await costPlan({ resolved, plan, runsRoot, apply: opts.rightSize === true && !source });
  for (const line of costing.lines) log(line);
  const rightSized = source?.rightSized ?? costing.rightSized;
  const render = (runDir: string) => renderPlan(plan, resolved, stack, runDir, scheduler.kind);
  const hashesOf = (rendered: readonly RenderedJob[]) => {
    const h: Record<string, string> = {};
    for (const r of rendered) {
      h[r.job.scriptFile] = sha256(r.script);
      if (r.table) h[r.table.file] = sha256(r.table.text);
    }
    return h;
  };
  // Reproduction check: rendered for the recorded run dir, the scripts must be the recorded bytes.
  let reproduction: { identical: boolean; differing: string[] } | undefined;
  if (source) {
    const again = hashesOf(render(source.runDir));
    const files = new Set([...Object.keys(again), ...Object.keys(source.scripts)]);
    const differing = [...files].filter((f) => again[f] !== source!.scripts[f]);
    reproduction = { identical: differing.length === 0, differing };
  }

  const lock = opts.dryRun ? undefined : await acquireLock(join(runsRoot, '.kdgat-runner.lock'));
  try {
    const previousStudy = tune ? existingStudy(runsRoot, tune.study) : undefined;
    if (tune && previousStudy !== undefined) throw new StudyExistsError(tune.study, previousStudy);
    if (!opts.dryRun && !opts.force) {
      const active: { runDir: string; jobIds: string[] }[] = [];
      for (const m of earlierRuns(runsRoot, experiment, resolved.specHash)) {
        const ids = m.jobs.flatMap((j) => (j.jobId ? [j.jobId] : []));
        const states = await schedulerForManifest(m).query(ids);
        const live = ids.filter((id) => (states.get(id) ?? []).some((t) => isActive(t.state)));
        if (live.length > 0) active.push({ runDir: m.runDir, jobIds: live });
      }
      if (active.length > 0) throw new AlreadyQueuedError(resolved.specHash, active);
    }

    let runDir = join(runsRoot, experiment, `${utcStamp()}-${resolved.specHash.slice(0, 8)}`);
    for (let n = 2; existsSync(runDir); n++) runDir = `${runDir.replace(/-\d+$/, '')}-${n}`;
    const rendered = render(runDir);
    // The scripts carry the site's run dir; a plan against a site that is not provisioned is
    // written into the checkout instead (the site's scratch does not exist yet, here or there).
    const outDir = isDeclaredOnly(stack)
      ? join(opts.repoRoot, '.hpc', 'plans', stackName, experiment, basename(runDir))
      : runDir;
    mkdirSync(join(outDir, 'scripts'), { recursive: true });
    mkdirSync(join(outDir, 'logs'), { recursive: true });
    linkStageInputs(outDir, inputs);
    for (const r of rendered) {
      const p = join(outDir, r.job.scriptFile);
      mkdirSync(dirname(p), { recursive: true });
      writeFileSync(p, r.script, { mode: 0o755 });
      if (r.table) writeFileSync(join(outDir, r.table.file), r.table.text);
    }
    const studyDir = tune ? join(runDir, 'study') : undefined;
    if (tune && studyDir) {
      mkdirSync(join(outDir, 'study'), { recursive: true });
      writeFileSync(join(outDir, 'study', STUDY_FILE), `${JSON.stringify(studyConfig(resolved, tune, runDir), null, 2)}\n`);
    }
    const lockCopy = copyLockIntoRun(outDir, stack);
    if (lockCopy.note && !isDeclaredOnly(stack)) log(`note: ${lockCopy.note}`);
    const scripts = hashesOf(rendered);
    const arrayIndex: Manifest['arrayIndex'] = {};
    for (const job of plan.jobs) {
      if (!job.points) continue;
      arrayIndex[job.key] = Object.fromEntries(job.points.map((p, i) => [String(i), p]));
    }
    const manifest: Manifest = {
      version: MANIFEST_VERSION,
      experiment,
      createdAt: new Date().toISOString(),
      runDir,
      spec: { file: specFile, text: specText, hash: resolved.specHash },
      resolved,
      warnings: (loaded.warnings ?? []).map((w: unknown) => (typeof w === 'string' ? w : JSON.stringify(w))),
      git: await gitInfo(opts.repoRoot),
      environment: {
        name: stack.environment.name,
        specHash: stack.environment.specHash,
        lockHash: stack.environment.lockHash,
        lockPath: stack.environment.lockPath,
        ...(lockCopy.file ? { lockFile: lockCopy.file } : {}),
        ...(envChange?.changed && source
          ? { changedFrom: { lockHash: source.environment.lockHash, differences: envChange.differences } }
          : {}),
      },
      // The lock text is in the run dir (lockFile), not repeated here.
      stack: {
        name: stackName,
        source: stackSource.description,
        outputs: { ...stack, environment: withoutLockText(stack.environment) },
      },
      scheduler: scheduler.kind,
      scripts,
      jobs: rendered.map(({ job: j, runRoot, logs }) => ({
        key: j.key,
        name: j.name,
        stageId: j.stageId,
        script: j.scriptFile,
        dependsOn: j.dependsOn,
        ...(j.aftercorr ? { aftercorr: j.aftercorr } : {}),
        ...(j.array ? { array: j.array } : {}),
        runRoot,
        logs,
      })),
      arrayIndex,
      ...(inputs.length > 0 ? { inputs } : {}),
      ...(tune && studyDir ? { tune: { study: tune.study, studyDir } } : {}),
      ...(fromStudy ? { fromStudy } : {}),
      cost: costRecord(costing, resolved),
      ...(rightSized && Object.keys(rightSized).length > 0 ? { rightSized } : {}),
      submission: {
        status: 'planned',
        ...(opts.force ? { forced: true } : {}),
        ...(source ? { reproducedFrom: source.runDir } : {}),
      },
    };
    writeManifest(outDir, manifest);
    log(`rendered ${rendered.length} script(s) into ${outDir}`);

    const preflight = await preflightPlan(rendered, outDir, scheduler);
    const result: TrainResult = { runDir: outDir, manifest, plan, preflight, scheduler, costing };
    if (tune && studyDir) result.study = { name: tune.study, dir: studyDir };
    if (reproduction) result.reproduction = reproduction;
    if (preflight.some((r) => !r.ok)) {
      const err = new PreflightError(preflight);
      manifest.submission = { ...manifest.submission, status: 'failed', error: err.message };
      writeManifest(outDir, manifest);
      throw err;
    }
    if (opts.dryRun) return result;

    const submitted = await submitPlan(rendered, runDir, scheduler);
    for (const j of manifest.jobs) {
      const id = submitted.jobIds.get(j.key);
      if (id) j.jobId = id;
    }
    if (submitted.error) {
      manifest.submission = {
        ...manifest.submission,
        status: 'failed',
        error: submitted.error,
        cancelledAfterFailure: submitted.cancelledAfterFailure ?? [],
      };
      writeManifest(runDir, manifest);
      throw new SubmissionFailedError(
        `${submitted.error}\n  already queued parts cancelled: ${(submitted.cancelledAfterFailure ?? []).join(', ') || 'none'}; see ${join(runDir, MANIFEST_FILE)}`,
        runDir,
      );
    }
    manifest.submission = { ...manifest.submission, status: 'submitted' };
    writeManifest(runDir, manifest);
    if (tune && studyDir) {
      // The study's name now points at this run's study dir (tune-report, train --from-study).
      const link = studyLink(runsRoot, tune.study);
      mkdirSync(dirname(link), { recursive: true });
      rmSync(link, { force: true }); // only a dangling link can be here: checked above, under the lock
      symlinkSync(studyDir, link);
    }
    return result;
  } finally {
    lock?.release();
  }
}

/**
 * The spec with the study's best trial applied: its values become the tuned stage's overrides and
 * the tune: section goes (this is a training run now). Returned as JSON text (valid YAML), which
 * the manifest records, so `--from-manifest` reproduces the same run.
 */
async function applyBestTrial(
  specText: string,
  specFile: string,
  studyArg: string,
  stack: StackOutputs,
): Promise<{ text: string; provenance: NonNullable<Manifest['fromStudy']> }> {
  const studyDir = resolveStudyDir(studyArg, stack.scratch.runsDir);
  const config = JSON.parse(readFileSync(join(studyDir, STUDY_FILE), 'utf8')) as {
    study: string;
    stageId: string;
    objective: { metric: string };
  };
  const report = await runTuneReport(stack, studyDir, { json: true, plots: false });
  const best = report.best;
  if (!best) {
    const c = report.counts;
    throw new Error(
      `study ${config.study} has no complete trial yet (${c['RUNNING'] ?? 0} running, ${c['PRUNED'] ?? 0} pruned, ${c['FAIL'] ?? 0} failed): wait for it, see \`nx run runner:tune-report --study ${config.study}\``,
    );
  }
  const parsed = parseYaml(specText, specFile);
  if (parsed.syntaxIssues.length) throw new Error(`${specFile}: ${parsed.syntaxIssues[0]!.message}`);
  const spec = structuredClone(parsed.value) as { stages?: { id?: string; overrides?: Record<string, Scalar> }[]; tune?: unknown };
  const stage = spec.stages?.find((s) => s.id === config.stageId);
  if (!stage)
    throw new Error(
      `study ${config.study} tuned stage ${config.stageId}, which ${specFile} does not have: pass the spec the study was made from`,
    );
  stage.overrides = { ...(stage.overrides ?? {}), ...best.params };
  delete spec.tune;
  return {
    text: `${JSON.stringify(spec, null, 2)}\n`,
    provenance: {
      study: config.study,
      studyDir,
      stageId: config.stageId,
      trial: best.number,
      metric: config.objective.metric,
      value: best.value,
      params: best.params,
    },
  };
}

function withoutLockText(environment: StackOutputs['environment']): StackOutputs['environment'] {
  const { lock: _text, ...rest } = environment;
  return rest;
}

export function describeRun(runDir: string): string {
  return `${basename(dirname(runDir))}/${basename(runDir)}`;
}
