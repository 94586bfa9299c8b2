// `runner tensorboard RUN_DIR | --study NAME`: where a run's (or a study's) TensorBoard event files
// are — every training stage writes them in `<stage dir>/tensorboard/` — as the log dir to give
// TensorBoard: on a site over SSH the site's path (for OnDemand's TensorBoard app) and the local
// copy's, brought back first. `--serve` starts TensorBoard here on the local copy, on loopback only.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { pythonOf, resolveStudyDir, type StackOutputs } from '@kdgat/planning';
import {
  MANIFEST_FILE,
  TENSORBOARD_DIR,
  copyLine,
  isRemote,
  readManifest,
  refreshCopy,
  tensorboardDirs,
} from '@kdgat/run-record';
import { localRunsRoot } from '@kdgat/runs';
import { openRun, stackSource, workspaceOf, type Command, type CommandContext } from './kit.ts';

/** TensorBoard's own default port. */
export const DEFAULT_PORT = 6006;

export interface TensorboardFlags {
  /** The run dir (positional), or the study (--study): exactly one. */
  run?: string;
  study?: string;
  serve: boolean;
  port: number;
}

/** The command's flags, refused before anything is read. */
export function tensorboardFlags(ctx: CommandContext): TensorboardFlags {
  const { values, positionals } = ctx;
  const run = values.run ?? positionals[1];
  if (positionals.length > 2)
    throw ctx.usage(`tensorboard takes one run directory, not ${positionals.length - 1}`);
  if (run !== undefined && values.study !== undefined)
    throw ctx.usage('name a run directory or --study NAME, not both');
  if (run === undefined && values.study === undefined)
    throw ctx.usage('name the run: tensorboard RUN_DIR, or tensorboard --study NAME [--stack S]');
  if (values.port !== undefined && values.serve !== true)
    throw ctx.usage('--port goes with --serve (the port TensorBoard listens on here)');
  const port =
    values.port === undefined ? DEFAULT_PORT : /^\d+$/.test(values.port) ? Number(values.port) : NaN;
  if (!(port >= 1 && port <= 65535))
    throw ctx.usage(`--port ${values.port}: expected a port number, 1 to 65535`);
  return {
    ...(run !== undefined ? { run } : {}),
    ...(values.study !== undefined ? { study: values.study } : {}),
    serve: values.serve === true,
    port,
  };
}

/** Where the event files are: here, and on the site for a run there; and the stack that reads them. */
interface LogDir {
  local: string;
  site?: { host: string; path: string };
  stack: StackOutputs;
}

async function runLogDir(ctx: CommandContext): Promise<LogDir> {
  const { record } = await openRun(ctx);
  const { manifest } = record;
  const connection = manifest.stack.outputs.connection;
  return {
    local: record.dir,
    ...(isRemote(manifest) && connection?.kind === 'ssh'
      ? { site: { host: connection.host, path: manifest.runDir } }
      : {}),
    stack: manifest.stack.outputs,
  };
}

async function studyLogDir(ctx: CommandContext, study: string): Promise<LogDir> {
  const name = ctx.values.stack ?? 'local';
  const stack = await stackSource(ctx.values).read(name);
  const remote = stack.connection.kind === 'ssh';
  const dir = resolveStudyDir(
    study,
    remote ? localRunsRoot(workspaceOf(ctx.values), name) : stack.scratch.runsDir,
  );
  const runDir = dirname(dir);
  if (!existsSync(join(runDir, MANIFEST_FILE))) return { local: dir, stack };
  const manifest = readManifest(runDir);
  if (!isRemote(manifest) || stack.connection.kind !== 'ssh') return { local: dir, stack };
  ctx.io.err.write(`${copyLine(manifest, runDir, await refreshCopy(manifest, runDir))}\n`);
  return {
    local: dir,
    site: {
      host: stack.connection.host,
      path: `${manifest.runDir.replace(/\/+$/, '')}/${relative(runDir, dir)}`,
    },
    stack,
  };
}

export const tensorboardCommand: Command = async (ctx) => {
  const flags = tensorboardFlags(ctx);
  const { say } = ctx;
  const logDir = flags.study !== undefined ? await studyLogDir(ctx, flags.study) : await runLogDir(ctx);
  if (logDir.site) {
    say(
      `tensorboard log dir on the site: ${logDir.site.path} (${logDir.site.host}; give it to OnDemand's TensorBoard app)`,
    );
    say(`tensorboard log dir here: ${logDir.local} (the local copy)`);
  } else say(`tensorboard log dir: ${logDir.local}`);
  const runs = tensorboardDirs(logDir.local);
  if (runs.length === 0)
    say(
      `  no TensorBoard event files under it yet (a training stage writes them in <stage dir>/${TENSORBOARD_DIR}/)`,
    );
  else say(`  ${runs.length} stage run(s) with event files: ${runs.join(', ')}`);
  if (!flags.serve) {
    say(
      `  to look at them here: runner tensorboard ${flags.study !== undefined ? `--study ${flags.study}` : flags.run} --serve`,
    );
    return 0;
  }
  return serve(ctx, logDir, flags.port);
};

/** TensorBoard on the local copy, on 127.0.0.1 only, until it is stopped (Ctrl-C). */
async function serve(ctx: CommandContext, logDir: LogDir, port: number): Promise<number> {
  const python = pythonOf(logDir.stack);
  const probe = spawnSync(python, ['-c', 'import tensorboard'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0)
    throw new Error(
      `TensorBoard is not installed for ${python}: it is a dependency of the pipeline (python/pyproject.toml), ` +
        `so \`npm run bootstrap\` (uv sync) installs it in this checkout's python/.venv; or \`${python} -m pip install tensorboard\`, ` +
        `or set HPC_PYTHON to a python that has it`,
    );
  ctx.say(
    `TensorBoard: http://127.0.0.1:${port}/ (serving ${logDir.local} on this machine only; Ctrl-C stops it)`,
  );
  const args = [
    '-m',
    'tensorboard.main',
    '--logdir',
    logDir.local,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
  ];
  return new Promise((resolve, reject) => {
    // Ctrl-C is TensorBoard's to stop on; this process waits to see how it ended.
    const ignore = () => undefined;
    process.on('SIGINT', ignore);
    const child = spawn(python, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    const done = () => process.off('SIGINT', ignore);
    child.on('error', (e) => {
      done();
      reject(new Error(`could not start TensorBoard (${python}): ${e.message}`));
    });
    child.on('close', (code, signal) => {
      done();
      resolve(signal === 'SIGINT' || code === 0 || code === 130 ? 0 : (code ?? 1));
    });
  });
}
