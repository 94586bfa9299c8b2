// @kdgat/usage — what runs cost and use: the cost of a plan before it is queued, the job records the
// epilog leaves, requests sized from the history of earlier runs, and the verdict on a run.
export * from './cost/estimate.ts';
export * from './balance/balance.ts';
export * from './records/record.ts';
export * from './history/runs.ts';
export * from './history/right-size.ts';
export * from './verdict/verdict.ts';
