// The run contract: the facts the job scripts, the runner and the Python pipeline share (requeue exit
// status, acknowledgement file, signal variable, run-dir layout, the stages and what each logs per
// epoch). Declared once, in the default pipeline's package (RUN_CONTRACT_FILE) — shipped inside it,
// so the pipeline on a compute node has it — and read here, validated at load.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { RUN_CONTRACT_FILE } from '../pipeline/default-package.ts';
import { REQUEUE_SIGNALS } from '../script-values.ts';

export { RUN_CONTRACT_FILE };

const Ident = z.string().regex(/^[a-z_][a-z0-9_]*$/, 'a snake_case name');
const FileName = z.string().regex(/^[A-Za-z0-9._-]+$/, 'a file name');
const RelPath = z.string().regex(/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/, 'a path relative to the run dir');

export const RunContractSchema = z
  .object({
    $comment: z.string().optional(),
    requeue: z
      .object({
        exitStatus: z.number().int().min(1).max(255),
        signalEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name'),
        defaultSignal: z.enum(REQUEUE_SIGNALS),
        ackFile: FileName,
        ackFields: z.object({ stage: z.array(Ident).min(1), tune: z.array(Ident).min(1) }).strict(),
      })
      .strict(),
    /** The OOM back-off across jobs: what a resubmission sets, what the pipeline prints when it gives up. */
    oom: z
      .object({
        batchSizeEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name'),
        gaveUpLine: z.string().min(1),
      })
      .strict(),
    runDir: z
      .object({
        layout: z.string(),
        nameParts: z.array(z.enum(['model', 'scale', 'stage'])).length(3),
        separator: z.string().length(1),
        files: z
          .object({
            metrics: FileName,
            checkpoint: RelPath,
            model: FileName,
            history: FileName,
            profilerTraces: FileName,
            /** The folder of TensorBoard event files every training stage writes. */
            tensorboard: FileName,
          })
          .strict(),
      })
      .strict(),
    stages: z
      .array(
        z
          .object({
            name: z.string().regex(/^[a-z]+$/, 'a lower-case stage name'),
            epochMetrics: z.array(Ident),
          })
          .strict(),
      )
      .min(1),
    /**
     * A sharded stage: array task i of N gets indexEnv=i and countEnv=N and builds its share into
     * the shard ledger; the join job that follows gets countEnv=N alone and joins the shards.
     */
    shards: z
      .object({
        $comment: z.string().optional(),
        indexEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name'),
        countEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name'),
      })
      .strict(),
    /** The table of all runs: one Parquet file per row in `<runs root>/<dir>/` (the pipeline writes and reads it). */
    catalogue: z
      .object({
        $comment: z.string().optional(),
        dir: FileName,
        schema: z.string().min(1),
        columns: z
          .array(
            z
              .object({
                name: Ident,
                type: z.enum(['string', 'int64', 'float64', 'bool', 'timestamp']),
                kind: z.enum(['identity', 'outcome', 'score', 'cost', 'provenance']),
                doc: z.string().min(1),
              })
              .strict(),
          )
          .min(1),
      })
      .strict(),
  })
  .strict();

export type RunContract = z.infer<typeof RunContractSchema>;

/** Parses the contract's text, throwing an error that names the file, the field and what was expected. */
export function parseRunContract(text: string, file: string = RUN_CONTRACT_FILE.pathname): RunContract {
  const parsed = RunContractSchema.safeParse(JSON.parse(text));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`${file} is not a valid run contract: ${problems}`);
  }
  return parsed.data;
}

export const RUN_CONTRACT: RunContract = parseRunContract(readFileSync(RUN_CONTRACT_FILE, 'utf8'));

/** The pipeline's stages, in order. */
export const STAGES: readonly [string, ...string[]] = (() => {
  const names = RUN_CONTRACT.stages.map((s) => s.name);
  return [names[0]!, ...names.slice(1)];
})();

/** What each training stage logs once per validation epoch (what a pruner can watch); stages that train nothing are absent. */
export const STAGE_METRICS: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  RUN_CONTRACT.stages.filter((s) => s.epochMetrics.length > 0).map((s) => [s.name, s.epochMetrics]),
);

/** The catalogue's folder under a runs root (`<runs root>/catalogue`): one Parquet file per finished stage. */
export const CATALOGUE_DIR: string = RUN_CONTRACT.catalogue.dir;

/** The run dir's own name, `<model>_<scale>_<stage>`. */
export function runDirName(run: { model: string; scale: string; stage: string }): string {
  return RUN_CONTRACT.runDir.nameParts.map((p) => run[p]).join(RUN_CONTRACT.runDir.separator);
}

/** A run dir below its run root: `<dataset>/<model>_<scale>_<stage>` (join it onto the run root). */
export function runDirPath(run: { dataset: string; model: string; scale: string; stage: string }): string {
  return `${run.dataset}/${runDirName(run)}`;
}
