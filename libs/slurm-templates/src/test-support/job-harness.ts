/** Renders a job into a sandbox whose scratch, scripts, environment and TMPDIR all live in the sandbox. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EnvironmentView, LayoutView } from '../inputs.ts';
import { JOB_LIBRARY, type JobLibraryRef } from '../job-library/job-library.ts';
import { renderSiteScripts, siteJobLibrary, type SiteProfileView } from '../site/render-site-scripts.ts';
import { renderTrainJob, type TrainJobInput } from '../train-job/render-train-job.ts';
import { pitzer } from '../fixtures.test-support.ts';
import type { Sandbox } from './sandbox.ts';

export interface SandboxSite {
  layout: LayoutView;
  env: EnvironmentView;
  profile: SiteProfileView;
  scripts: { stageData: string; epilog: string };
  scriptsDir: string;
  /** The job library, installed in the sandbox's scripts dir as infra installs it on a site. */
  jobLibrary: JobLibraryRef;
}

export function makeSite(
  sb: Sandbox,
  opts: { profile?: SiteProfileView; env?: EnvironmentView; datasets?: string[]; scratchName?: string } = {},
): SandboxSite {
  const scratch = join(sb.dir, opts.scratchName ?? 'scratch');
  const datasets = opts.datasets ?? ['hcrl_sa'];
  const layout: LayoutView = {
    root: scratch,
    cacheDirs: Object.fromEntries(datasets.map((d) => [d, join(scratch, 'cache', d)])),
    runsDir: join(scratch, 'runs'),
    logsDir: join(sb.dir, 'logs'),
  };
  for (const dir of Object.values(layout.cacheDirs)) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'graphs.pt'), Buffer.alloc(50_000, 3));
    writeFileSync(join(dir, 'vocab.pkl'), 'vocab');
  }
  const env = opts.env ?? {
    name: 'gnn-rapids',
    backend: 'conda',
    prefix: join(sb.dir, 'envs', 'gnn-rapids'),
  };
  if (env.backend === 'venv' && env.prefix) {
    sb.write(
      join(env.prefix.slice(sb.dir.length + 1), 'bin', 'activate'),
      'printf "%s" "$BASH_SOURCE" >"$STUB_LOG/venv-activated"\n',
    );
  }
  const profile = opts.profile ?? pitzer;
  const scriptsDir = join(scratch, 'scripts');
  const site = renderSiteScripts(profile, env, layout, { scriptsDir, gpuSampleSeconds: 1 });
  for (const [name, text] of Object.entries(site))
    sb.write(join(scriptsDir.slice(sb.dir.length + 1), name), text, 0o755);
  const jobLibrary = siteJobLibrary(scriptsDir, 'sandbox');
  sb.write(jobLibrary.path.slice(sb.dir.length + 1), JOB_LIBRARY.text);
  return {
    layout,
    env,
    profile,
    scripts: { stageData: join(scriptsDir, 'stage_data.sh'), epilog: join(scriptsDir, 'job_epilog.sh') },
    scriptsDir,
    jobLibrary,
  };
}

export function jobInput(site: SandboxSite, partial: Partial<TrainJobInput> = {}): TrainJobInput {
  return {
    experiment: 'sandbox run',
    stage: {
      id: 'autoencoder',
      stage: 'autoencoder',
      model: 'vgae',
      scale: 'large',
      dataset: 'hcrl_sa',
      overrides: { 'training.max_epochs': 3 },
      resources: {
        cpus: 2,
        memGB: 4,
        gpus: { count: 1, type: 'v100' },
        nodes: 1,
        ntasksPerNode: 1,
        time: '10:00',
        partition: 'gpu',
        arrayConcurrency: 2,
      },
    },
    profile: site.profile,
    environment: site.env,
    layout: site.layout,
    runRoot: join(site.layout.runsDir, 'exp'),
    scripts: site.scripts,
    jobLibrary: site.jobLibrary,
    requeue: { enabled: true, signal: 'USR1', leadSeconds: 60, maxRestarts: 3 },
    staging: { enabled: true, datasets: ['hcrl_sa'] },
    gpuSampleSeconds: 1,
    ...partial,
  };
}

/** Renders the job (and its array table) into the sandbox; returns the script path. */
export function writeJob(sb: Sandbox, input: TrainJobInput, name = 'job.sh'): string {
  const job = renderTrainJob(input);
  if (job.arrayTable !== undefined && input.arrayTablePath)
    writeFileSync(input.arrayTablePath, job.arrayTable);
  return sb.write(name, job.script, 0o755);
}
