// @kdgat/runner: the CLI. The logic is in @kdgat/planning, @kdgat/run-record and @kdgat/schedulers.
export { main, USAGE } from './cli/main.ts';
export { train, type TrainResult } from './commands/train.ts';
export { plan } from './commands/plan.ts';
export { tune } from './commands/tune.ts';
export type { RunOptions } from './commands/steps.ts';
