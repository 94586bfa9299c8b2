// kdgat-runner: argument parsing, wiring and output. The logic lives in plan/ submit/ track/.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { SpecValidationError, StackConfigError } from '@kdgat/config';
import { readManifest, writeManifest, type Manifest } from '../manifest/manifest.ts';
import { isFailure } from '../schedulers/core.ts';
import {
  FileStackOutputs,
  PulumiStackOutputs,
  StackNotProvisionedError,
  type StackOutputsSource,
} from '../stack/outputs.ts';
import { DeclaredStackOutputs, type PredictedStackOutputs } from '../stack/declared.ts';
import { EnvironmentChangedError } from '../submit/environment-lock.ts';
import { PreflightError } from '../submit/submit.ts';
import { StageInputError } from '../inputs/inputs.ts';
import {
  AlreadyQueuedError,
  StudyExistsError,
  SubmissionFailedError,
  schedulerForManifest,
  train,
} from '../submit/train.ts';
import { resolveStudyDir, runTuneReport } from '../tune/study.ts';
import { BudgetExceededError } from '../cost/plan-cost.ts';
import { verdictLines, writeReport } from '../report/report.ts';
import { logPathsOf, tailFile } from '../track/files.ts';
import {
  formatTable,
  progressOf,
  rememberStates,
  statusLine,
  summaryRows,
  watchRun,
} from '../track/track.ts';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

export const USAGE = `kdgat-runner — turn an experiment spec into SLURM jobs (or local runs), check them before
queueing, follow them, and record a manifest.

usage:
  kdgat-runner train  --spec FILE.yaml [--stack NAME] [--wait] [--force] [--right-size]
  kdgat-runner train  --from-manifest RUN_DIR|manifest.json [--stack NAME] [--wait] [--force] [--allow-env-change]
  kdgat-runner train  --spec FILE.yaml --from-study STUDY --best [--stack NAME] [--wait]
  kdgat-runner plan   --spec FILE.yaml [--stack NAME]        render + preflight, submit nothing
                                                             (a stack not provisioned yet: planned from
                                                             infra/Pulumi.NAME.yaml; preflight skipped)
  kdgat-runner tune   --spec FILE.yaml [--stack NAME] [--wait] [--dry-run]
                                                             the spec's tune: study as a worker array
  kdgat-runner tune-report --study NAME|DIR [--stack NAME] [--json]
                                                             trial counts, pruning rate, durations, best
  kdgat-runner status RUN_DIR [--json]                       state of every job and array task
  kdgat-runner logs   RUN_DIR [--job KEY] [--index N] [--lines N]
  kdgat-runner cancel RUN_DIR                                cancel every job of the run
  kdgat-runner report RUN_DIR                                report.html + PNGs: curves, usage, verdict

options:
  --spec FILE            experiment spec (YAML), validated with @kdgat/config
  --stack NAME           infra stack whose outputs to use (default: local)
  --stack-outputs FILE   read stack outputs from a JSON file instead of \`pulumi stack output\`
  --scheduler KIND       slurm | local (default: the cluster profile's scheduler)
  --wait                 follow the run to the end; exit non-zero if any job failed
  --force                submit even if a run of the same spec is queued or running
  --from-manifest PATH   re-render and submit a recorded run (same scripts, byte for byte); refused
                         when the environment's lock changed since, listing the packages that differ
  --allow-env-change     with --from-manifest: run on the changed environment anyway
  --from-study STUDY     with --best: train the study's best trial (its values as the tuned stage's overrides)
  --study NAME|DIR       a study: its name (tune.study) or its directory
  --dry-run              tune: render + preflight, submit nothing
  --right-size           train: request the cpus, memGB and time that plan suggests from earlier runs
  -h, --help             this text

exit status: 0 ok · 1 a job failed or an error · 2 bad arguments or invalid spec ·
             3 refused (stack not provisioned, preflight, already queued, environment changed, over budget)`;

const OPTIONS = {
  spec: { type: 'string' },
  stack: { type: 'string' },
  'stack-outputs': { type: 'string' },
  scheduler: { type: 'string' },
  wait: { type: 'boolean' },
  force: { type: 'boolean' },
  'from-manifest': { type: 'string' },
  'allow-env-change': { type: 'boolean' },
  run: { type: 'string' },
  job: { type: 'string' },
  index: { type: 'string' },
  lines: { type: 'string' },
  json: { type: 'boolean' },
  'from-study': { type: 'string' },
  best: { type: 'boolean' },
  study: { type: 'string' },
  'dry-run': { type: 'boolean' },
  'right-size': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const BOOLEAN_FLAGS = new Set(
  Object.entries(OPTIONS)
    .filter(([, o]) => o.type === 'boolean')
    .map(([k]) => k),
);

/** Nx forwards booleans as `--wait=true`; parseArgs wants bare flags. */
export function normaliseArgv(argv: readonly string[]): string[] {
  return argv.flatMap((a) => {
    const m = /^--([a-z-]+)=(true|false)$/.exec(a);
    if (m && BOOLEAN_FLAGS.has(m[1]!)) return m[2] === 'true' ? [`--${m[1]}`] : [];
    return [a];
  });
}

export class UsageError extends Error {}

interface Io {
  out: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  err: NodeJS.WritableStream;
}

function stackSource(values: { 'stack-outputs'?: string }): StackOutputsSource {
  return values['stack-outputs']
    ? new FileStackOutputs(resolve(values['stack-outputs']))
    : new PulumiStackOutputs(REPO_ROOT);
}

function loadRun(arg: string | undefined): Manifest {
  if (!arg) throw new UsageError('name the run: a run directory or its manifest.json');
  const p = resolve(arg);
  if (!existsSync(p)) throw new UsageError(`run ${arg}: no such directory or file`);
  return readManifest(p);
}

async function follow(manifest: Manifest, io: Io): Promise<number> {
  const scheduler = schedulerForManifest(manifest);
  const progress = await watchRun({
    scheduler,
    manifest,
    out: io.out,
    onPoll: (p) => {
      rememberStates(manifest, p);
      writeManifest(manifest.runDir, manifest);
    },
  });
  const rows = summaryRows(manifest, progress);
  io.out.write(`\n${formatTable(rows)}\n`);
  const failed = rows.filter((r) => isFailure(r.state));
  io.out.write(
    failed.length > 0
      ? `\n${failed.length} task(s) did not complete.\n`
      : `\nall ${rows.length} task(s) completed; manifest: ${join(manifest.runDir, 'manifest.json')}\n`,
  );
  const verdict = verdictLines(manifest);
  if (verdict.length > 0) io.out.write(`\n${verdict.join('\n')}\n`);
  io.out.write(`report: nx run runner:report ${manifest.runDir}\n`);
  return failed.length > 0 ? 1 : 0;
}

export async function main(
  argv: readonly string[],
  io: Io = { out: process.stdout, err: process.stderr },
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: normaliseArgv(argv), options: OPTIONS, allowPositionals: true, strict: true });
  } catch (e) {
    io.err.write(`kdgat-runner: ${(e as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const command = positionals[0];
  if (values.help || !command || command === 'help') {
    io.out.write(`${USAGE}\n`);
    return command || values.help ? 0 : 2;
  }
  const say = (line: string) => io.out.write(`${line}\n`);
  try {
    switch (command) {
      case 'train':
      case 'tune':
      case 'plan': {
        if (values.scheduler && values.scheduler !== 'slurm' && values.scheduler !== 'local') {
          throw new UsageError(`--scheduler ${values.scheduler}: expected slurm or local`);
        }
        const dryRun = command === 'plan' || values['dry-run'] === true;
        if (values['from-study'] !== undefined && values.best !== true)
          throw new UsageError('--from-study needs --best (the best trial is the one that can be trained)');
        if (values.best === true && values['from-study'] === undefined)
          throw new UsageError('--best needs --from-study STUDY');
        if (values['allow-env-change'] && values['from-manifest'] === undefined)
          throw new UsageError('--allow-env-change goes with --from-manifest RUN_DIR');
        if (values['from-study'] !== undefined && command !== 'train')
          throw new UsageError(`--from-study is an option of train, not ${command}`);
        const result = await train({
          mode: command === 'tune' ? 'tune' : 'train',
          ...(values['from-study'] ? { fromStudy: values['from-study'] } : {}),
          ...(values.spec ? { specPath: values.spec } : {}),
          ...(values['from-manifest'] ? { fromManifest: values['from-manifest'] } : {}),
          ...(values.stack ? { stack: values.stack } : {}),
          ...(values.scheduler ? { scheduler: values.scheduler as 'slurm' | 'local' } : {}),
          stackSource: stackSource(values),
          // Only without --stack-outputs: a file of outputs is what the user asked to plan against.
          ...(values['stack-outputs'] ? {} : { declaredSource: new DeclaredStackOutputs(REPO_ROOT) }),
          ...(values['allow-env-change'] ? { allowEnvChange: true } : {}),
          force: values.force === true,
          rightSize: values['right-size'] === true,
          dryRun,
          repoRoot: REPO_ROOT,
          log: say,
        });
        const { manifest } = result;
        say(
          `${dryRun ? 'plan' : 'run'}: ${manifest.experiment} (spec ${manifest.spec.hash.slice(0, 8)}) on stack ${manifest.stack.name}, scheduler ${manifest.scheduler}`,
        );
        const declared = manifest.stack.outputs as Partial<PredictedStackOutputs>;
        if (declared.declared) {
          say(
            `stack ${manifest.stack.name} is NOT provisioned: paths and environment predicted from ${declared.declared.file}; \`train\` needs \`npx nx run infra:up --stack ${manifest.stack.name}\` first`,
          );
          say(`run dir on the site (in the scripts): ${manifest.runDir}`);
          say(`plan written to: ${result.runDir}`);
        } else say(`run dir: ${result.runDir}`);
        for (const job of result.plan.jobs) {
          const pre = result.preflight.find((r) => r.job.key === job.key);
          const what = job.tune
            ? `array of ${job.tune.workers} tune workers on study ${result.study?.name ?? ''}`
            : job.array
            ? `array of ${job.array.size} (%${job.array.concurrency}, points ${job.array.firstPoint}-${job.array.firstPoint + job.array.size - 1})`
            : 'job';
          const corr = new Set(job.aftercorr ?? []);
          const deps = job.dependsOn.length
            ? ` after ${job.dependsOn.map((k) => (corr.has(k) ? `${k} (task by task)` : k)).join(', ')}`
            : '';
          const id = manifest.jobs.find((j) => j.key === job.key)?.jobId;
          say(
            `  ${job.key}: ${what}${deps} — ${join(result.runDir, job.scriptFile)}${id ? ` — job ${id}` : ''}`,
          );
          if (pre) say(`    preflight: ${pre.message}`);
        }
        if (result.reproduction) {
          const r = result.reproduction;
          say(
            r.identical
              ? `reproduced from ${manifest.submission.reproducedFrom}: re-rendered scripts are byte-identical to the recorded ones`
              : `reproduced from ${manifest.submission.reproducedFrom}: re-rendered scripts DIFFER from the recorded ones: ${r.differing.join(', ')}`,
          );
        }
        if (dryRun) {
          say('nothing submitted (plan).');
          return 0;
        }
        say(`submitted ${manifest.jobs.length} job(s): ${manifest.jobs.map((j) => j.jobId).join(', ')}`);
        if (result.study) {
          say(`study ${result.study.name}: ${result.study.dir}`);
          say(`  report: nx run runner:tune-report --study ${result.study.name}`);
        }
        if (!values.wait) return 0;
        const status = await follow(manifest, io);
        if (result.study) {
          say('');
          say(await runTuneReport(manifest.stack.outputs, result.study.dir, { json: false, plots: true }));
        }
        return status;
      }
      case 'tune-report': {
        const studyArg = values.study ?? positionals[1];
        if (!studyArg) throw new UsageError('tune-report needs --study NAME|DIR');
        const stack = await stackSource(values).read(values.stack ?? 'local');
        const dir = resolveStudyDir(studyArg, stack.scratch.runsDir);
        if (values.json) say(JSON.stringify(await runTuneReport(stack, dir, { json: true, plots: true }), null, 2));
        else io.out.write(await runTuneReport(stack, dir, { json: false, plots: true }));
        return 0;
      }
      case 'status': {
        const manifest = loadRun(values.run ?? positionals[1]);
        const scheduler = schedulerForManifest(manifest);
        const states = await scheduler.query(manifest.jobs.flatMap((j) => (j.jobId ? [j.jobId] : [])));
        const progress = progressOf(manifest, states);
        rememberStates(manifest, progress);
        writeManifest(manifest.runDir, manifest);
        if (values.json) {
          say(
            JSON.stringify(
              progress.map((p) => ({
                key: p.job.key,
                jobId: p.job.jobId,
                state: p.state,
                counts: p.counts,
                tasks: p.tasks,
              })),
              null,
              2,
            ),
          );
        } else {
          say(`${manifest.experiment}: ${manifest.runDir} (submission ${manifest.submission.status})`);
          for (const p of progress) say(`  ${statusLine(p)}`);
          say('');
          say(formatTable(summaryRows(manifest, progress)));
        }
        return 0;
      }
      case 'logs': {
        const manifest = loadRun(values.run ?? positionals[1]);
        const job = values.job ? manifest.jobs.find((j) => j.key === values.job) : manifest.jobs[0];
        if (!job)
          throw new UsageError(
            `--job ${values.job}: expected one of ${manifest.jobs.map((j) => j.key).join(', ')}`,
          );
        if (!job.jobId) throw new UsageError(`job ${job.key} was never submitted`);
        const index = values.index !== undefined ? Number(values.index) : job.array ? 0 : undefined;
        const states = await schedulerForManifest(manifest).query([job.jobId]);
        const task = (states.get(job.jobId) ?? []).find((t) => t.arrayIndex === index) ?? {
          jobId: job.jobId,
          state: 'UNKNOWN' as const,
          ...(index !== undefined ? { arrayIndex: index } : {}),
        };
        const paths = logPathsOf(job, task);
        const present = [paths.output, paths.error].filter(
          (p, i, all) => existsSync(p) && all.indexOf(p) === i,
        );
        if (present.length === 0) {
          io.err.write(`no log yet at ${paths.output}\n`);
          return 1;
        }
        for (const path of present) {
          say(`==> ${path} <==`);
          say(values.lines ? tailFile(path, Number(values.lines)) : readFileSync(path, 'utf8').trimEnd());
        }
        return 0;
      }
      case 'report': {
        const manifest = loadRun(values.run ?? positionals[1]);
        const r = await writeReport(manifest, say);
        say(`report: ${r.html} (${r.plots.length} plot(s), ${r.seconds.toFixed(1)} s)`);
        for (const [stage, b] of Object.entries(r.best))
          say(
            `  best point of ${stage}: #${b.index} (${Object.entries(b.point)
              .map(([k, v]) => `${k}=${String(v)}`)
              .join(', ')}): ${b.metric} = ${b.value}`,
          );
        for (const f of r.verdicts) say(`  ${f.code}: ${f.evidence}\n    fix: ${f.fix}`);
        return 0;
      }
      case 'cancel': {
        const manifest = loadRun(values.run ?? positionals[1]);
        const ids = manifest.jobs.flatMap((j) => (j.jobId ? [j.jobId] : []));
        const scheduler = schedulerForManifest(manifest);
        await scheduler.cancel(ids);
        const progress = progressOf(manifest, await scheduler.query(ids));
        rememberStates(manifest, progress);
        writeManifest(manifest.runDir, manifest);
        say(`cancelled ${ids.join(', ')}`);
        for (const p of progress) say(`  ${statusLine(p)}`);
        return 0;
      }
      default:
        throw new UsageError(
          `unknown command ${JSON.stringify(command)}: expected train, plan, tune, tune-report, status, logs, report or cancel`,
        );
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.err.write(`kdgat-runner: ${e.message}\n(see kdgat-runner --help)\n`);
      return 2;
    }
    if (e instanceof SpecValidationError) {
      io.err.write(`kdgat-runner: the spec is invalid; nothing was submitted:\n`);
      for (const i of (e as SpecValidationError).issues) {
        const at = `${i.file ?? ''}${i.line ? `:${i.line}:${i.col ?? 1}` : ''}`;
        io.err.write(
          `  ${at}${at ? ': ' : ''}${i.path}: ${i.message}${i.expected ? ` (expected ${i.expected}, found ${i.found})` : ''}\n`,
        );
      }
      return 2;
    }
    if (
      e instanceof StackNotProvisionedError ||
      e instanceof StageInputError ||
      e instanceof PreflightError ||
      e instanceof AlreadyQueuedError ||
      e instanceof StudyExistsError ||
      e instanceof EnvironmentChangedError ||
      e instanceof BudgetExceededError
    ) {
      io.err.write(`kdgat-runner: ${e.message}\n`);
      return 3;
    }
    if (e instanceof StackConfigError) {
      io.err.write(`kdgat-runner: ${e.message}\n`);
      return 2;
    }
    if (e instanceof SubmissionFailedError) {
      io.err.write(`kdgat-runner: ${e.message}\n`);
      return 1;
    }
    io.err.write(`kdgat-runner: ${(e as Error).message}\n`);
    return 1;
  }
}
