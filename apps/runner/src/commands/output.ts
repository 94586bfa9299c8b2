// What train, plan and tune print of the run they made: where it is, each job with its dependencies
// and preflight verdict, a reproduction's byte check, and the job ids queued. (The plan's cost, the
// sizes history suggests and the balance are printed before anything is queued by the guard phase:
// cost-lines.ts of @kdgat/runs.)
import { join } from 'node:path';
import { throttleLines, type PredictedStackOutputs } from '@kdgat/planning';
import { environmentOfStage } from '@kdgat/run-record';
import type { RunResult } from '@kdgat/runs';

/** `, cluster X (-M X, auto)` for a run placed on one of a site's clusters. */
export function clusterOf(manifest: Pick<RunResult['manifest'], 'placement'>): string {
  const p = manifest.placement;
  return p ? `, cluster ${p.cluster} (${p.via ? `-M ${p.via}, ` : ''}${p.mode})` : '';
}

export function printRun(result: RunResult, opts: { dryRun: boolean }, say: (line: string) => void): void {
  const { manifest } = result;
  say(
    `${opts.dryRun ? 'plan' : 'run'}: ${manifest.experiment} (spec ${manifest.spec.hash.slice(0, 8)}) on stack ${manifest.stack.name}, scheduler ${manifest.scheduler}${clusterOf(manifest)}`,
  );
  const declared = manifest.stack.outputs as Partial<PredictedStackOutputs>;
  if (declared.declared) {
    say(
      `stack ${manifest.stack.name} is NOT provisioned: paths and environments predicted from ${declared.declared.file}; \`train\` needs \`npx nx run infra:up --stack ${manifest.stack.name}\` first`,
    );
    say(`run dir on the site (in the scripts): ${manifest.runDir}`);
    say(`plan written to: ${result.runDir}`);
  } else if (result.runDir !== manifest.runDir)
    say(`run dir: ${manifest.runDir} on the site; local copy: ${result.runDir}`);
  else say(`run dir: ${result.runDir}`);
  for (const line of result.plan.throttle ? throttleLines(result.plan.throttle, result.plan) : []) say(line);
  for (const job of result.plan.jobs) {
    const pre = result.preflight.find((r) => r.job.key === job.key);
    const what = job.tune
      ? `array of ${job.tune.workers} tune workers on study ${result.study?.name ?? ''}`
      : job.shards
        ? job.shards.task
          ? `array of ${job.shards.count} shard tasks (%${job.array?.concurrency ?? job.shards.count})`
          : `join of ${job.shards.count} shards`
        : job.array
          ? `array of ${job.array.size} (%${job.array.concurrency}, points ${job.array.firstPoint}-${job.array.firstPoint + job.array.size - 1})`
          : 'job';
    const corr = new Set(job.aftercorr ?? []);
    const any = new Set(job.afterany ?? []);
    const deps = job.dependsOn.length
      ? ` after ${job.dependsOn.map((k) => (corr.has(k) ? `${k} (task by task)` : any.has(k) ? `${k} drains` : k)).join(', ')}`
      : '';
    const id = manifest.jobs.find((j) => j.key === job.key)?.jobId;
    // A run of several environments says which each job runs in.
    const env = manifest.otherEnvironments?.length
      ? ` in ${environmentOfStage(manifest, job.stageId).name}`
      : '';
    say(
      `  ${job.key}: ${what}${deps}${env} — ${join(result.runDir, job.scriptFile)}${id ? ` — job ${id}` : ''}`,
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
    if (r.note) say(`  ${r.note}`);
  }
  if (opts.dryRun) say('nothing submitted (plan).');
  else say(`submitted ${manifest.jobs.length} job(s): ${manifest.jobs.map((j) => j.jobId).join(', ')}`);
}
