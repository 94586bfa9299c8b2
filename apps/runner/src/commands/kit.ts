// What every command is handed (its context) and the helpers they share: the run options train,
// plan and tune read, the stack's outputs, and the run a command names. The command line
// (cli/) parses argv into a CommandContext and calls a command; commands never import cli/.
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveWorkspace, useWorkspace, type Workspace } from '@kdgat/config';
import {
  DeclaredStackOutputs,
  FileStackOutputs,
  PulumiStackOutputs,
  type StackConfigs,
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
import { UsageError, type Io, type OpenedRun, type RunOptions } from '@kdgat/runs';

export { UsageError, type Io, type OpenedRun };

/** The tool's own checkout: its Pulumi program, the default pipeline's code, its own workspace. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

/**
 * The workspace a command works in (`--workspace DIR`, else $KDGAT_HPC_WORKSPACE, else the first
 * kdgat-hpc.yaml at or above the current directory, else this checkout's own).
 */
export function workspaceOf(values: Flags): Workspace {
  const ws = resolveWorkspace({
    ...(values.workspace !== undefined ? { explicit: values.workspace } : {}),
    fallback: REPO_ROOT,
  });
  // What the workspace's declarations name relatively (an environment's lock) resolves against it.
  useWorkspace(ws);
  return ws;
}

/** Where the command's stacks are declared: the workspace (or $HPC_INFRA_DIR's own project). */
export function stackConfigs(values: Flags): StackConfigs {
  const projectDir = process.env['HPC_INFRA_DIR'];
  return {
    workspace: workspaceOf(values),
    repoRoot: REPO_ROOT,
    ...(projectDir ? { projectDir } : {}),
  };
}

/** The flags a command may read, as parsed (cli/args.ts `OPTIONS` declares each one). */
export interface Flags {
  workspace?: string;
  spec?: string;
  stack?: string;
  'stack-outputs'?: string;
  scheduler?: string;
  cluster?: string;
  wait?: boolean;
  force?: boolean;
  'from-manifest'?: string;
  'allow-env-change'?: boolean;
  run?: string;
  job?: string;
  index?: string;
  lines?: string;
  json?: boolean;
  'from-study'?: string;
  best?: boolean;
  study?: string;
  'dry-run'?: boolean;
  'right-size'?: boolean;
  'allow-dirty'?: boolean;
  stage?: string;
  partition?: string;
  cpus?: string;
  'mem-gb'?: string;
  gpus?: string;
  time?: string;
  where?: string;
  sort?: string;
  columns?: string;
  serve?: boolean;
  port?: string;
  help?: boolean;
}

/** What a command is handed: its flags and arguments, where to print, and how to refuse them. */
export interface CommandContext {
  command: string;
  values: Flags;
  positionals: string[];
  io: Io;
  say: (line: string) => void;
  usage: (message: string) => UsageError;
}

/** A command: prints what it did and returns the exit status. */
export type Command = (ctx: CommandContext) => Promise<number>;

/** Where the stack's outputs come from: `--stack-outputs FILE`, else `pulumi stack output`. */
export function stackSource(values: Flags): StackOutputsSource {
  return values['stack-outputs']
    ? new FileStackOutputs(resolve(values['stack-outputs']))
    : new PulumiStackOutputs(stackConfigs(values));
}

/** The flags train, plan and tune share. */
/** `--cluster NAME|auto`: a cluster profile's name, its SLURM name, or `auto`. */
function clusterFlag(ctx: CommandContext, value: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(value))
    throw ctx.usage(`--cluster ${JSON.stringify(value)}: expected a cluster's name or auto`);
  return value;
}

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
  const configs = stackConfigs(values);
  return {
    ...(values.spec ? { specPath: values.spec } : {}),
    ...(values['from-manifest'] ? { fromManifest: values['from-manifest'] } : {}),
    ...(values.stack ? { stack: values.stack } : {}),
    ...(values.scheduler ? { scheduler: values.scheduler as 'slurm' | 'local' } : {}),
    ...(values.cluster !== undefined ? { cluster: clusterFlag(ctx, values.cluster) } : {}),
    stackSource: stackSource(values),
    // Only without --stack-outputs: a file of outputs is what the user asked to plan against.
    ...(values['stack-outputs'] ? {} : { declaredSource: new DeclaredStackOutputs(configs) }),
    ...(values['allow-env-change'] ? { allowEnvChange: true } : {}),
    repoRoot: REPO_ROOT,
    configs,
    log: ctx.say,
  };
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
