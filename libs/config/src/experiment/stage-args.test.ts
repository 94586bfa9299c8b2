import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadExperimentSpec, resolveStageArgs, SpecValidationError, type SpecIssue } from '../index.ts';

// A teacher -> student chain of a declared pipeline (the example's tiny-lightning declaration):
// the student's own words name the teacher's checkpoint.
const EXAMPLES = new URL('../../../../examples/', import.meta.url).pathname;
const base = readFileSync(join(EXAMPLES, 'tiny-lightning.yaml'), 'utf8').replace(/\nsweep:[\s\S]*$/, '\n');
const stage = (id: string, extra = '') =>
  `  - id: ${id}\n    stage: train\n    model: mlp\n    scale: small\n    dataset: synth\n${extra}`;
const spec = (stages: string, tail = '') => base.replace(/\nstages:[\s\S]*$/, `\nstages:\n${stages}${tail}`);
const load = (text: string) => loadExperimentSpec({ text, file: join(EXAMPLES, 'kd.yaml') });
function issuesOf(text: string): SpecIssue[] {
  try {
    load(text);
  } catch (e) {
    if (e instanceof SpecValidationError) return e.issues;
    throw e;
  }
  throw new Error('expected the spec to be rejected');
}

const student = stage(
  'student',
  '    args: [--teacher-path, "{output:teacher.checkpoint}", "--log={output:teacher.dir}/x"]\n',
);

describe("a stage's args and the outputs of earlier stages", () => {
  it('resolves an output to its path below the run root, adds the dependency and records the read', () => {
    const { resolved } = load(spec(stage('teacher') + student));
    const s = resolved.stages[1]!;
    expect(s.dependsOn).toEqual(['teacher']);
    expect(s.args).toEqual([
      '--teacher-path',
      '{run_root}/synth/mlp_small_train/checkpoints/last.ckpt',
      '--log={run_root}/synth/mlp_small_train/x',
    ]);
    expect(s.reads).toEqual([
      { stage: 'teacher', output: 'checkpoint', path: 'synth/mlp_small_train/checkpoints/last.ckpt' },
      { stage: 'teacher', output: 'dir', path: 'synth/mlp_small_train' },
    ]);
  });

  it('refuses a later stage, an unknown output and an unknown placeholder, naming the word', () => {
    const [later] = issuesOf(spec(student + stage('teacher')));
    expect(later).toMatchObject({ path: 'stages[0].args[1]', expected: 'no output of a later stage' });
    expect(later!.message).toMatch(/names stage teacher, which is not an earlier stage/);
    const noMetrics = spec(stage('teacher') + stage('s', '    args: ["{output:teacher.weights}"]\n'));
    expect(issuesOf(noMetrics)[0]!.message).toMatch(
      /\{weights\}|output:teacher\.weights.*is not a placeholder/,
    );
    const [typo] = issuesOf(spec(stage('teacher') + stage('s', '    args: ["{outptu:teacher.dir}"]\n')));
    expect(typo!.message).toMatch(/is not a placeholder: expected one of .*\{output:<earlier stage id>/);
  });

  it('refuses an output the pipeline does not declare, and names what it declares', () => {
    const teacher = { id: 'teacher', stage: 'train', model: 'mlp', scale: 'small', dataset: 'synth' };
    const r = resolveStageArgs(['{output:teacher.metrics}'], 1, [teacher, { ...teacher, id: 's' }], {
      name: 'mine',
      outputs: { checkpoint: 'ckpt/last.ckpt' },
    });
    expect(r.dependsOn).toEqual([]);
    expect(r.problems).toEqual([
      {
        path: ['stages', 1, 'args', 0],
        message: '{output:teacher.metrics}: pipeline mine declares no outputs.metrics',
        expected: 'an output its declaration names (outputs: checkpoint), or {output:teacher.dir}',
        found: '"{output:teacher.metrics}"',
      },
    ]);
    const glob = resolveStageArgs(['{output:teacher.checkpoint}'], 1, [teacher, { ...teacher, id: 's' }], {
      name: 'mine',
      outputs: { checkpoint: ['hpc_ckpt_*.ckpt'] },
    });
    expect(glob.problems[0]!.message).toBe(
      "{output:teacher.checkpoint}: pipeline mine's outputs.checkpoint starts with the pattern hpc_ckpt_*.ckpt, not one file",
    );
  });
});

describe('sweep.stages: a sweep over the student keeps one teacher', () => {
  const sweep = '\nsweep:\n  grid:\n    lr: [0.01, 0.05]\n  stages: [student]\n';
  it('marks the stages outside it as run once', () => {
    const { resolved } = load(spec(stage('teacher') + student, sweep));
    expect(resolved.sweepPoints).toHaveLength(2);
    expect(resolved.stages.map((s) => [s.id, s.sweep])).toEqual([
      ['teacher', false],
      ['student', undefined],
    ]);
  });

  it('refuses an unknown stage id, and a stage run once that reads a swept one', () => {
    const [unknown] = issuesOf(spec(stage('teacher') + student, sweep.replace('[student]', '[studnet]')));
    expect(unknown).toMatchObject({ path: 'sweep.stages[0]', found: '"studnet"' });
    const [once] = issuesOf(spec(stage('teacher') + student, sweep.replace('[student]', '[teacher]')));
    expect(once).toMatchObject({
      path: 'stages[1].args',
      expected: 'student in sweep.stages, or teacher out of it',
    });
  });
});
