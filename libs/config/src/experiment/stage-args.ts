// A stage's own words (`args:`), appended to its pipeline's command, and the outputs of earlier
// stages a word names (`{output:teacher.checkpoint}`): the knowledge-distillation student reading
// its teacher's checkpoint. Naming an output adds the dependency, is checked against what the
// pipeline declares, and resolves to the path below the run root the job fills in (`{run_root}`).
import { z } from 'zod';
import { runDirPath } from '../contract/run-contract.ts';
import { COMMAND_PLACEHOLDERS, outputPatterns, type Pipeline } from '../pipeline/pipeline.ts';
import type { Problem } from './resolve.ts';

/** What `{output:<stage>.<name>}` may name: a declared output of the pipeline, or the stage's run dir. */
export const STAGE_OUTPUTS = ['dir', 'checkpoint', 'metrics', 'history'] as const;
export type StageOutputName = (typeof STAGE_OUTPUTS)[number];

const OUTPUT_REF = /^output:([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\.([a-z]+)$/;

/** A word of `args:`: one argv entry, printable, on one line; `{…}` only a placeholder or an output. */
export const StageArgWord = z
  .string()
  .min(1, 'a non-empty word')
  .regex(/^[^\0\n\r]+$/, 'a word without NUL or line breaks')
  .superRefine((word, ctx) => {
    for (const m of word.matchAll(/\{([^}]*)\}/g)) {
      const name = m[1]!;
      if ((COMMAND_PLACEHOLDERS as readonly string[]).includes(name)) continue;
      const ref = OUTPUT_REF.exec(name);
      if (ref && (STAGE_OUTPUTS as readonly string[]).includes(ref[2]!)) continue;
      ctx.addIssue({
        code: 'custom',
        message: `{${name}} is not a placeholder: expected one of ${COMMAND_PLACEHOLDERS.map((p) => `{${p}}`).join(', ')} or {output:<earlier stage id>.<${STAGE_OUTPUTS.join('|')}>}`,
      });
    }
  });

/** An earlier stage's output a stage reads through its args (recorded in the manifest with the run). */
export interface StageOutputRead {
  stage: string;
  output: StageOutputName;
  /** Below the run's root (`outputs/`; a sweep point's own root for a swept producer): `<dataset>/<run dir>/<file>`. */
  path: string;
}

interface StageRef {
  id: string;
  dataset: string;
  model: string;
  scale: string;
  stage: string;
}

/**
 * A stage's args resolved: `{output:s.name}` becomes `{run_root}/<s's run dir>/<declared file>`,
 * each named stage a dependency. A stage not earlier in the spec, an output the pipeline does
 * not declare, or a stage reading itself is a problem naming the word.
 */
export function resolveStageArgs(
  args: readonly string[] | undefined,
  index: number,
  stages: readonly StageRef[],
  pipeline: Pick<Pipeline, 'name' | 'outputs'>,
): { args: string[]; reads: StageOutputRead[]; dependsOn: string[]; problems: Problem[] } {
  const out = {
    args: [] as string[],
    reads: [] as StageOutputRead[],
    dependsOn: [] as string[],
    problems: [] as Problem[],
  };
  const earlier = stages.slice(0, index);
  (args ?? []).forEach((word, j) => {
    const path = ['stages', index, 'args', j];
    const resolved = word.replace(
      /\{output:([^}.]+)\.([a-z]+)\}/g,
      (text, id: string, name: StageOutputName) => {
        const producer = earlier.find((s) => s.id === id);
        if (!producer) {
          out.problems.push({
            path,
            message: `${text} names stage ${id}, which is not an earlier stage of this spec`,
            expected: earlier.length
              ? `one of ${earlier.map((s) => s.id).join(', ')}`
              : 'no output of a later stage',
            found: JSON.stringify(word),
          });
          return text;
        }
        const file = name === 'dir' ? undefined : outputPatterns(pipeline.outputs[name])[0];
        if (file?.includes('*')) {
          out.problems.push({
            path,
            message: `${text}: pipeline ${pipeline.name}'s outputs.${name} starts with the pattern ${file}, not one file`,
            expected: `a plain path first in outputs.${name} (e.g. checkpoints/last.ckpt), or {output:${id}.dir} and the file's name after it`,
            found: JSON.stringify(word),
          });
          return text;
        }
        if (name !== 'dir' && file === undefined) {
          out.problems.push({
            path,
            message: `${text}: pipeline ${pipeline.name} declares no outputs.${name}`,
            expected: `an output its declaration names (outputs: ${Object.keys(pipeline.outputs).join(', ') || 'none'}), or {output:${id}.dir}`,
            found: JSON.stringify(word),
          });
          return text;
        }
        const rel = file === undefined ? runDirPath(producer) : `${runDirPath(producer)}/${file}`;
        if (!out.dependsOn.includes(id)) out.dependsOn.push(id);
        if (!out.reads.some((r) => r.stage === id && r.output === name))
          out.reads.push({ stage: id, output: name, path: rel });
        return `{run_root}/${rel}`;
      },
    );
    out.args.push(resolved);
  });
  return out;
}
