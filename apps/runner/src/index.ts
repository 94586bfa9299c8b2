// @kdgat/runner: the CLI. The logic is in @kdgat/planning, @kdgat/run-record and @kdgat/schedulers.
export { main, USAGE } from './cli/main.ts';
export { train } from './commands/train.ts';
export { plan } from './commands/plan.ts';
export { tune } from './commands/tune.ts';
export type { RunOptions, RunResult } from '@kdgat/runs';
