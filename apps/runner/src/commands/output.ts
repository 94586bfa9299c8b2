// What train, plan and tune print about the run they made: where it is, each job with its
// dependencies and preflight verdict, a reproduction's byte check, and the job ids queued.
import { join } from 'node:path';
import type { PredictedStackOutputs } from '@kdgat/planning';
import type { RunResult } from './steps.ts';

export function printRun(result: RunResult, opts: { dryRun: boolean }, say: (line: string) => void): void {
  const { manifest } = result;
  say(
    `${opts.dryRun ? 'plan' : 'run'}: ${manifest.experiment} (spec ${manifest.spec.hash.slice(0, 8)}) on stack ${manifest.stack.name}, scheduler ${manifest.scheduler}`,
  );
  const declared = manifest.stack.outputs as Partial<PredictedStackOutputs>;
  if (declared.declared) {
    say(
      `stack ${manifest.stack.name} is NOT provisioned: paths and environment predicted from ${declared.declared.file}; \`train\` needs \`npx nx run infra:up --stack ${manifest.stack.name}\` first`,
    );
    say(`run dir on the site (in the scripts): ${manifest.runDir}`);
    say(`plan written to: ${result.runDir}`);
  } else if (result.runDir !== manifest.runDir)
    say(`run dir: ${manifest.runDir} on the site; local copy: ${result.runDir}`);
  else say(`run dir: ${result.runDir}`);
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
    say(`  ${job.key}: ${what}${deps} — ${join(result.runDir, job.scriptFile)}${id ? ` — job ${id}` : ''}`);
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
  if (opts.dryRun) say('nothing submitted (plan).');
  else say(`submitted ${manifest.jobs.length} job(s): ${manifest.jobs.map((j) => j.jobId).join(', ')}`);
}
