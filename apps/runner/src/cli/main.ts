// kdgat-runner: parse the arguments, hand them to the command (commands/, one file each), and
// turn what it throws into a message and an exit status.
import { parseArgs } from 'node:util';
import { InitError, SpecValidationError, StackConfigError, WorkspaceError } from '@kdgat/config';
import {
  BudgetExceededError,
  PreflightError,
  StackNotProvisionedError,
  StudyExistsError,
} from '@kdgat/planning';
import {
  ActiveRunCheckError,
  AlreadyQueuedError,
  DirtyTreeError,
  EnvironmentChangedError,
  StageInputError,
} from '@kdgat/run-record';
import { closeSessions } from '@kdgat/transport';
import { cancelCommand } from '../commands/cancel.ts';
import { infraCommand } from '../commands/infra.ts';
import { initCommand } from '../commands/init.ts';
import { logsCommand } from '../commands/logs.ts';
import { planCommand } from '../commands/plan.ts';
import { reportCommand } from '../commands/report.ts';
import { resumeCommand } from '../commands/resume.ts';
import { runsCommand } from '../commands/runs.ts';
import { shellCommand } from '../commands/shell.ts';
import { statusCommand } from '../commands/status.ts';
import { syncCommand } from '../commands/sync.ts';
import { tensorboardCommand } from '../commands/tensorboard.ts';
import { trainCommand } from '../commands/train.ts';
import { tuneReportCommand } from '../commands/tune-report.ts';
import { tuneCommand } from '../commands/tune.ts';
import { UsageError, type Command, type CommandContext, type Io } from '../commands/kit.ts';
import { OPTIONS, USAGE, normaliseArgv } from './args.ts';

export { USAGE, normaliseArgv } from './args.ts';
export { UsageError } from '../commands/kit.ts';

const COMMANDS: Record<string, Command> = {
  train: trainCommand,
  plan: planCommand,
  tune: tuneCommand,
  'tune-report': tuneReportCommand,
  status: statusCommand,
  resume: resumeCommand,
  logs: logsCommand,
  cancel: cancelCommand,
  report: reportCommand,
  shell: shellCommand,
  runs: runsCommand,
  tensorboard: tensorboardCommand,
  sync: syncCommand,
  init: initCommand,
  infra: infraCommand,
};

/** Refusals: nothing was queued, and the message says why and what to do (exit 3). */
const REFUSALS = [
  StackNotProvisionedError,
  StageInputError,
  PreflightError,
  AlreadyQueuedError,
  ActiveRunCheckError,
  StudyExistsError,
  EnvironmentChangedError,
  BudgetExceededError,
  DirtyTreeError,
];

/** The message and exit status of what a command threw. */
function failure(e: unknown, io: Io): number {
  if (e instanceof UsageError) {
    io.err.write(`kdgat-runner: ${e.message}\n(see kdgat-runner --help)\n`);
    return 2;
  }
  if (e instanceof SpecValidationError) {
    io.err.write(`kdgat-runner: the spec is invalid; nothing was submitted:\n`);
    for (const i of e.issues) {
      const at = `${i.file ?? ''}${i.line ? `:${i.line}:${i.col ?? 1}` : ''}`;
      io.err.write(
        `  ${at}${at ? ': ' : ''}${i.path}: ${i.message}${i.expected ? ` (expected ${i.expected}, found ${i.found})` : ''}\n`,
      );
    }
    return 2;
  }
  io.err.write(`kdgat-runner: ${(e as Error).message}\n`);
  if (REFUSALS.some((k) => e instanceof k)) return 3;
  if (e instanceof StackConfigError || e instanceof WorkspaceError || e instanceof InitError) return 2;
  return 1; // SubmissionFailedError and anything unforeseen
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
  const ctx: CommandContext = {
    command,
    values,
    positionals,
    io,
    say: (line) => io.out.write(`${line}\n`),
    usage: (message) => new UsageError(message),
  };
  try {
    const run = COMMANDS[command];
    if (!run)
      throw new UsageError(
        `unknown command ${JSON.stringify(command)}: expected init, infra, train, plan, tune, tune-report, status, resume, logs, report, cancel, shell, runs, tensorboard or sync`,
      );
    return await run(ctx);
  } catch (e) {
    return failure(e, io);
  } finally {
    // The command's SSH master (a site over ssh) ends with it.
    closeSessions();
  }
}
