// Rules that need the site a spec runs on (what the stack provisioned, or would provision), not
// only the spec and its cluster profile. Pure: problems come back with their field paths.
import type { Problem, ResolvedExperiment } from './resolve.ts';

/** What a stack provides that a spec can ask for: the datasets with a scratch cache dir. */
export interface SiteView {
  /** The stack's name, for messages (`osc-pitzer`). */
  stack: string;
  /** Dataset -> scratch cache dir (stack output `scratch.cacheDirs`, or the predicted layout). */
  cacheDirs: Record<string, string>;
}

/**
 * Every dataset a job reads from the scratch cache must have a cache dir on the site: the staging
 * list when staging names one, otherwise each stage's own dataset (what the job script stages or
 * points the pipeline's cache-root variable at).
 */
export function siteProblems(resolved: ResolvedExperiment, site: SiteView): Problem[] {
  const known = Object.keys(site.cacheDirs);
  const expected = known.length
    ? `a dataset with a cache dir on stack ${site.stack}: one of ${known.join(', ')}`
    : `a dataset with a cache dir on stack ${site.stack} (it declares none)`;
  const fix = `add it to the stack's datasets (stacks/${site.stack}.yaml of the workspace, kdgat-hpc:datasets) and run \`nx run infra:up --stack ${site.stack}\``;
  const problems: Problem[] = [];
  const { staging } = resolved;
  if (staging.enabled && staging.datasets.length > 0) {
    staging.datasets.forEach((d, i) => {
      if (!(d in site.cacheDirs))
        problems.push({
          path: ['staging', 'datasets', i],
          message: `stack ${site.stack} has no cache dir for dataset "${d}", so there is nothing to stage: ${fix}`,
          expected,
          found: JSON.stringify(d),
        });
    });
    return problems;
  }
  resolved.stages.forEach((s, i) => {
    if (!(s.dataset in site.cacheDirs))
      problems.push({
        path: ['stages', i, 'dataset'],
        message: `stack ${site.stack} has no cache dir for dataset "${s.dataset}": ${fix}`,
        expected,
        found: JSON.stringify(s.dataset),
      });
  });
  return problems;
}
