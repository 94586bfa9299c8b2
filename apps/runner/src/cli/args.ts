// The command line: usage text, options, and what every command is handed (its context).
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  DeclaredStackOutputs,
  FileStackOutputs,
  PulumiStackOutputs,
  type StackOutputsSource,
} from '@kdgat/planning';
import {
  MANIFEST_FILE,
  RunRecord,
  copyLine,
  isRemote,
  localView,
  refreshCopy,
  siteFilesOf,
} from '@kdgat/run-record';
import type { Manifest, Output } from '@kdgat/run-record';
import type { RunOptions } from '../pipeline/prepare.ts';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

export const USAGE = `kdgat-runner — turn an experiment spec into SLURM jobs (or local runs), check them before
queueing, follow them, and record a manifest.

usage:
  kdgat-runner train  --spec FILE.yaml [--stack NAME] [--wait] [--force] [--right-size] [--allow-dirty]
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
  kdgat-runner resume RUN_DIR [--wait]                       resubmit the failures a run can survive
                                                             (NODE_FAIL: another node; OUT_OF_MEMORY:
                                                             more memory or a smaller batch; TIMEOUT
                                                             without the requeue handshake: more time),
                                                             each from checkpoints/last.ckpt; --wait
                                                             follows it (train --wait does this too)
  kdgat-runner logs   RUN_DIR [--job KEY] [--index N] [--lines N]
  kdgat-runner cancel RUN_DIR                                cancel every job of the run
  kdgat-runner report RUN_DIR                                report.html + PNGs: curves, usage, verdict

options:
  --spec FILE            experiment spec (YAML), validated with @kdgat/config
  --stack NAME           infra stack whose outputs to use (default: local)
  --stack-outputs FILE   read stack outputs from a JSON file instead of \`pulumi stack output\`
  --scheduler KIND       slurm | local (default: the cluster profile's scheduler)
  --wait                 follow the run to the end, resubmitting the failures it can survive
                         (at most requeue.maxRecoveries per job, within the budget); exit non-zero
                         if any job did not complete
  --force                submit even if a run of the same spec is queued or running
  --from-manifest PATH   re-render and submit a recorded run (same scripts, byte for byte); refused
                         when the environment's lock changed since, listing the packages that differ
  --allow-env-change     with --from-manifest: run on the changed environment anyway
  --from-study STUDY     with --best: train the study's best trial (its values as the tuned stage's overrides)
  --study NAME|DIR       a study: its name (tune.study) or its directory
  --dry-run              tune: render + preflight, submit nothing
  --right-size           train: request the cpus, memGB and time that plan suggests from earlier runs
  --allow-dirty          a site over ssh: send python/ with uncommitted changes (the diff is kept in
                         the run dir and named in the manifest); without it such a tree is refused

A stack whose connection is ssh is reached over one SSH master per command: scripts, the code
snapshot and the manifest are written on the site; status, logs and report bring back a local copy
of the run (.hpc/sites/STACK/runs/…) and say how fresh it is.
  -h, --help             this text

exit status: 0 ok · 1 a job failed or an error · 2 bad arguments or invalid spec ·
             3 refused (stack not provisioned, preflight, already queued, environment changed, over budget)`;

export const OPTIONS = {
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
  'allow-dirty': { type: 'boolean' },
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

export interface Io {
  out: Output;
  err: NodeJS.WritableStream;
}

type Values = {
  [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'boolean' ? boolean : string;
};

/** What a command is handed: its flags and arguments, where to print, and how to refuse them. */
export interface CommandContext {
  command: string;
  values: Values;
  positionals: string[];
  io: Io;
  say: (line: string) => void;
  usage: (message: string) => UsageError;
}

/** A command: prints what it did and returns the exit status. */
export type Command = (ctx: CommandContext) => Promise<number>;

/** Where the stack's outputs come from: `--stack-outputs FILE`, else `pulumi stack output`. */
export function stackSource(values: Values): StackOutputsSource {
  return values['stack-outputs']
    ? new FileStackOutputs(resolve(values['stack-outputs']))
    : new PulumiStackOutputs(REPO_ROOT);
}

/** The flags train, plan and tune share. */
export function runOptions(ctx: CommandContext): RunOptions {
  const { values, command } = ctx;
  if (values.scheduler && values.scheduler !== 'slurm' && values.scheduler !== 'local')
    throw ctx.usage(`--scheduler ${values.scheduler}: expected slurm or local`);
  if (values['from-study'] !== undefined && values.best !== true)
    throw ctx.usage('--from-study needs --best (the best trial is the one that can be trained)');
  if (values.best === true && values['from-study'] === undefined)
    throw ctx.usage('--best needs --from-study STUDY');
  if (values['allow-env-change'] && values['from-manifest'] === undefined)
    throw ctx.usage('--allow-env-change goes with --from-manifest RUN_DIR');
  if (values['from-study'] !== undefined && command !== 'train')
    throw ctx.usage(`--from-study is an option of train, not ${command}`);
  return {
    ...(values.spec ? { specPath: values.spec } : {}),
    ...(values['from-manifest'] ? { fromManifest: values['from-manifest'] } : {}),
    ...(values.stack ? { stack: values.stack } : {}),
    ...(values.scheduler ? { scheduler: values.scheduler as 'slurm' | 'local' } : {}),
    stackSource: stackSource(values),
    // Only without --stack-outputs: a file of outputs is what the user asked to plan against.
    ...(values['stack-outputs'] ? {} : { declaredSource: new DeclaredStackOutputs(REPO_ROOT) }),
    ...(values['allow-env-change'] ? { allowEnvChange: true } : {}),
    repoRoot: REPO_ROOT,
    log: ctx.say,
  };
}

/** A run as a command reads it: its record, and its manifest with paths where its files are here. */
export interface OpenedRun {
  record: RunRecord;
  /** The manifest with every path under the run dir pointing into the local copy (a site over SSH). */
  view: Manifest;
}

/**
 * The run a command names: its directory or manifest.json. A run on a site over SSH is its local
 * copy: brought back from the site first (`refresh`; logs, records, metrics), with one line on
 * stderr saying how fresh it is, and its manifest's changes written to the site as well.
 */
export async function openRun(
  ctx: CommandContext,
  opts: { refresh: boolean } = { refresh: true },
): Promise<OpenedRun> {
  const arg = ctx.values.run ?? ctx.positionals[1];
  if (!arg) throw ctx.usage('name the run: a run directory or its manifest.json');
  if (!existsSync(resolve(arg))) throw ctx.usage(`run ${arg}: no such directory or file`);
  const record = RunRecord.open(arg);
  const { manifest } = record;
  if (!isRemote(manifest)) return { record, view: manifest };
  const files = siteFilesOf(manifest);
  record.publishTo((text) => files.putFile(`${manifest.runDir}/${MANIFEST_FILE}`, text));
  if (opts.refresh)
    ctx.io.err.write(`${copyLine(manifest, record.dir, await refreshCopy(manifest, record.dir))}\n`);
  return { record, view: localView(manifest, record.dir) };
}
