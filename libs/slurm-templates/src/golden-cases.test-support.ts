/** The examples kept as golden files in __golden__/ (see golden.test.ts). */
import type { Scalar } from './inputs.ts';
import {
  condaEnv,
  localLayout,
  localProfile,
  pitzer,
  pitzerJob,
  pitzerLayout,
  stage,
  tinyLightning,
  venvEnv,
} from './fixtures.test-support.ts';
import { JOB_LIBRARY } from './job-library/job-library.ts';
import { renderSiteScripts } from './site/render-site-scripts.ts';
import { renderTrainJob } from './train-job/render-train-job.ts';

const scratch = pitzerLayout.root;

export function sweepPoints(): Record<string, Scalar>[] {
  const points: Record<string, Scalar>[] = [];
  for (const lr of [0.0003, 0.001, 0.003]) {
    for (const batch of [256, 512, 1024, 2048])
      points.push({ 'training.lr': lr, 'training.batch_size': batch });
  }
  return points;
}

/** fileName -> text of every golden file. */
export function goldenFiles(): Record<string, string> {
  const files: Record<string, string> = {};
  files['single-run.sh'] = renderTrainJob(pitzerJob()).script;

  // A stage of a chain: the chain itself (`--dependency`) is added by the runner's submit call.
  files['distillation-overrides.sh'] = renderTrainJob(
    pitzerJob({
      experiment: 'hcrl_sa kd chain',
      stage: stage({
        id: 'distillation',
        stage: 'distillation',
        model: 'gat',
        scale: 'small',
        overrides: { 'kd.alpha': 0.7, 'kd.temperature': 4 },
      }),
      runRoot: `${scratch}/runs/hcrl_sa-kd`,
    }),
  ).script;

  const sweep = renderTrainJob(
    pitzerJob({
      experiment: 'gat lr x batch sweep',
      stage: stage({
        id: 'curriculum',
        stage: 'curriculum',
        model: 'gat',
        overrides: { 'training.max_epochs': 50 },
      }),
      runRoot: `${scratch}/runs/gat-sweep`,
      sweepPoints: sweepPoints(),
      arrayTablePath: `${scratch}/runs/gat-sweep/curriculum.array.tsv`,
    }),
  );
  files['sweep-12-array.sh'] = sweep.script;
  files['sweep-12-array.tsv'] = sweep.arrayTable ?? '';

  // A preprocess stage over many recordings: its array of shard tasks, then the join.
  const preprocess = (task: boolean) =>
    renderTrainJob(
      pitzerJob({
        experiment: 'can-train-and-test preprocess',
        stage: stage({
          id: 'preprocess',
          stage: 'preprocess',
          model: 'gat',
          resources: {
            cpus: 4,
            memGB: 16,
            gpus: { count: 0 },
            nodes: 1,
            ntasksPerNode: 1,
            time: '1:00:00',
            partition: 'cpu',
            arrayConcurrency: 4,
          },
        }),
        runRoot: `${scratch}/runs/preprocess/outputs`,
        shards: { count: 16, task },
      }),
    ).script;
  files['preprocess-16-shards.sh'] = preprocess(true);
  files['preprocess-join.sh'] = preprocess(false);

  files['tune-4-workers.sh'] = renderTrainJob(
    pitzerJob({
      experiment: 'vgae lr study',
      stage: stage({ id: 'autoencoder', stage: 'autoencoder', model: 'vgae' }),
      runRoot: `${scratch}/runs/vgae-lr-study/outputs`,
      tune: { studyDir: `${scratch}/runs/vgae-lr-study/study`, workers: 4 },
    }),
  ).script;

  files['ddp-2node-8gpu.sh'] = renderTrainJob(
    pitzerJob({
      experiment: 'set_01 teacher ddp',
      stage: stage({
        id: 'curriculum',
        stage: 'curriculum',
        model: 'gat',
        dataset: 'set_01',
        // No DDP overrides: the pipeline takes the layout (tasks per node, nodes) from the SLURM
        // environment srun gives each task (the same path the 2-task e2e runs on the local SLURM).
        overrides: { 'training.batch_size': 64 },
        resources: {
          cpus: 12,
          memGB: 700,
          gpus: { count: 4, type: 'v100' },
          nodes: 2,
          ntasksPerNode: 4,
          time: '1-00:00:00',
          partition: 'gpu-quad',
          arrayConcurrency: 1,
        },
      }),
      runRoot: `${scratch}/runs/set_01-ddp`,
      staging: { enabled: true, datasets: ['set_01'] },
    }),
  ).script;

  files['local-executor.sh'] = renderTrainJob({
    experiment: 'quickstart',
    stage: stage({
      id: 'autoencoder',
      stage: 'autoencoder',
      model: 'vgae',
      scale: 'small',
      overrides: { 'training.max_epochs': 2 },
      resources: {
        cpus: 2,
        memGB: 4,
        gpus: { count: 0 },
        nodes: 1,
        ntasksPerNode: 1,
        time: '30:00',
        partition: 'local',
        arrayConcurrency: 1,
      },
    }),
    profile: localProfile,
    environment: venvEnv,
    layout: localLayout,
    runRoot: `${localLayout.runsDir}/quickstart`,
    scripts: {
      stageData: `${localLayout.root}/scripts/stage_data.sh`,
      epilog: `${localLayout.root}/scripts/job_epilog.sh`,
    },
    // A site without this version of the library: the runner writes it into the run's scripts/lib/.
    jobLibrary: {
      path: `${localLayout.runsDir}/quickstart/scripts/lib/${JOB_LIBRARY.file}`,
      fix: `it is written with the scripts of the run: render the run again (kdgat-runner train --from-manifest ${localLayout.runsDir}/quickstart)`,
    },
    requeue: { enabled: false, signal: 'USR1', leadSeconds: 60, maxRestarts: 0 },
    staging: { enabled: true, datasets: ['hcrl_sa'] },
  }).script;

  // A researcher's own pipeline (examples/pipelines/tiny-lightning.pipeline.yaml) as a sweep array on
  // Pitzer: its command, key=value overrides, its code snapshot first on PYTHONPATH, Lightning's requeue.
  const tiny = renderTrainJob(
    pitzerJob({
      experiment: 'tiny-lightning',
      stage: stage({ id: 'fit', stage: 'train', model: 'mlp', scale: 'small', overrides: { max_epochs: 3 } }),
      pipeline: tinyLightning(),
      environment: { ...condaEnv, code: `${scratch}/code/0123abcd`, codePaths: ['src'] },
      runRoot: `${scratch}/runs/tiny-lightning`,
      requeue: { enabled: true, signal: 'USR1', leadSeconds: 300, maxRestarts: 3, contract: 'lightning' },
      sweepPoints: [{ lr: 0.01 }, { lr: 0.05 }],
      arrayTablePath: `${scratch}/runs/tiny-lightning/scripts/fit.points.tsv`,
    }),
  );
  files['declared-pipeline-array.sh'] = tiny.script;
  files['declared-pipeline-array.tsv'] = tiny.arrayTable ?? '';

  // The same pipeline in a researcher's uv venv that needs the site's Python module (OSC's
  // `module load python/3.12`) before the venv's python runs: the job loads it, then activates.
  files['declared-pipeline-venv-modules.sh'] = renderTrainJob(
    pitzerJob({
      experiment: 'tiny-lightning',
      stage: stage({ id: 'fit', stage: 'train', model: 'mlp', scale: 'small', overrides: { max_epochs: 3 } }),
      pipeline: tinyLightning(),
      environment: {
        name: 'tiny-venv',
        backend: 'venv',
        prefix: '/fs/ess/PAS1266/envs/tiny-venv',
        modules: ['python/3.12'],
        code: `${scratch}/code/0123abcd`,
        codePaths: ['src'],
      },
      runRoot: `${scratch}/runs/tiny-lightning-venv`,
      requeue: { enabled: true, signal: 'USR1', leadSeconds: 300, maxRestarts: 3, contract: 'lightning' },
    }),
  ).script;

  // The shell every job script above loads (one file for all of them, named by its sha256).
  files['job-library.sh'] = JOB_LIBRARY.text;
  const site = (profile: typeof pitzer, env: typeof condaEnv, layout: typeof pitzerLayout) =>
    renderSiteScripts(profile, env, layout, { stack: profile.name });
  for (const [name, text] of Object.entries(site(pitzer, condaEnv, pitzerLayout)))
    files[`site-osc-pitzer/${name}`] = text;
  for (const [name, text] of Object.entries(site(localProfile, venvEnv, localLayout)))
    files[`site-local/${name}`] = text;
  return files;
}
