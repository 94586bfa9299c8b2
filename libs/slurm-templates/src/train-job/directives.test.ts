import { describe, expect, it } from 'vitest';
import { pitzer, pitzerJob } from '../fixtures.test-support.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { jobNameFor, renderTrainJob } from './render-train-job.ts';

const sbatch = (script: string) => script.split('\n').filter((l) => l.startsWith('#SBATCH '));
const base = pitzerJob();
const withResources = (r: Partial<typeof base.stage.resources>) =>
  pitzerJob({ stage: { ...base.stage, resources: { ...base.stage.resources, ...r } } });

describe('renderTrainJob directives', () => {
  it('asks for GPUs in the form the profile says', () => {
    const gpn = renderTrainJob(pitzerJob({ profile: { ...pitzer, gpuDirective: 'gpus-per-node' } })).script;
    expect(sbatch(gpn)).toContain('#SBATCH --gpus-per-node=v100:1');
    expect(sbatch(gpn).some((l) => l.includes('--gres'))).toBe(false);
    const untyped = renderTrainJob(withResources({ gpus: { count: 2 } })).script;
    expect(sbatch(untyped)).toContain('#SBATCH --gres=gpu:2');
    const typedByPartition = renderTrainJob({
      ...withResources({ gpus: { count: 2 } }),
      partition: { gpuType: 'a100' },
    }).script;
    expect(sbatch(typedByPartition)).toContain('#SBATCH --gres=gpu:a100:2');
    const cpu = renderTrainJob(withResources({ gpus: { count: 0 } })).script;
    expect(sbatch(cpu).some((l) => /gres|gpus/.test(l))).toBe(false);
  });

  it('writes fractional memory in MB and whole memory in GB', () => {
    expect(sbatch(renderTrainJob(withResources({ memGB: 1.5 })).script)).toContain('#SBATCH --mem=1536M');
    expect(sbatch(renderTrainJob(withResources({ memGB: 85 })).script)).toContain('#SBATCH --mem=85G');
  });

  it('limits array concurrency only when it is below the array size', () => {
    const points = [{ 'training.lr': 1 }, { 'training.lr': 2 }, { 'training.lr': 3 }];
    const arr = (k: number) =>
      sbatch(
        renderTrainJob({
          ...withResources({ arrayConcurrency: k }),
          sweepPoints: points,
          arrayTablePath: '/x/t.tsv',
        }).script,
      );
    expect(arr(2)).toContain('#SBATCH --array=0-2%2');
    expect(arr(0)).toContain('#SBATCH --array=0-2');
    expect(arr(5)).toContain('#SBATCH --array=0-2');
  });

  it('says --no-requeue and sets no signal when requeue is off', () => {
    const lines = sbatch(
      renderTrainJob(
        pitzerJob({ requeue: { enabled: false, signal: 'USR1', leadSeconds: 60, maxRestarts: 0 } }),
      ).script,
    );
    expect(lines).toContain('#SBATCH --no-requeue');
    expect(lines.some((l) => l.includes('--signal'))).toBe(false);
  });

  it('leaves dependencies to the submit call: job ids exist only once the jobs they name are queued', () => {
    expect(sbatch(renderTrainJob(pitzerJob()).script).some((l) => l.includes('--dependency'))).toBe(false);
  });

  it('refuses inputs with errors that name the field, the value and what was expected', () => {
    expect(() => renderTrainJob(pitzerJob({ profile: { ...pitzer, account: undefined } }))).toThrow(
      'slurm-templates: profile.account = undefined: expected an account: cluster profile osc-pitzer requires --account',
    );
    expect(() =>
      renderTrainJob(
        pitzerJob({ requeue: { enabled: true, signal: 'TERM', leadSeconds: 60, maxRestarts: 1 } }),
      ),
    ).toThrow(/requeue\.signal = "TERM": expected one of USR1/);
    expect(() => renderTrainJob({ ...pitzerJob(), sweepPoints: [{ 'training.lr': 1 }] })).toThrow(/arrayTablePath/);
    expect(() =>
      renderTrainJob(pitzerJob({ staging: { enabled: true, datasets: ['car_hacking'] } })),
    ).toThrow(
      /layout\.cacheDirs\.car_hacking = undefined: expected a scratch cache dir for dataset car_hacking \(known: hcrl_sa, set_01\)/,
    );
    expect(() => renderTrainJob(withResources({ time: '2 hours' }))).toThrow(TemplateInputError);
  });

  it('makes a job name from any experiment name', () => {
    expect(jobNameFor('HCRL SA teacher (v2)', 'curriculum')).toBe('kdgat-HCRL-SA-teacher-v2-curriculum');
    expect(jobNameFor('$(rm -rf /)\n', 'a')).toBe('kdgat-rm-rf-a');
    expect(jobNameFor('ünï', 'a')).toBe('kdgat-uni-a');
    expect(jobNameFor('', 'a')).toBe('kdgat-x-a');
  });
});
