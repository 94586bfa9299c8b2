// The leaf schemas the experiment and tune schemas share (no imports from either: no cycle).
import { z } from 'zod';
import { STAGES } from '../contract/run-contract.ts';
import { SCRIPT_VALUES, ruleString } from '../script-values.ts';

/** The pipeline's stages come from the run contract (RUN_CONTRACT_FILE, in the default pipeline's package). */
export { STAGES };
export const Stage = z.enum(STAGES);
export const Model = z.enum(['gat', 'vgae']);
export const Scale = z.enum(['large', 'small']);

/** A value given to the pipeline with `-O key value`. */
export const ScalarSchema = z.union([z.string(), z.number(), z.boolean(), z.null()]);
export type Scalar = z.infer<typeof ScalarSchema>;

/** Dotted pipeline config keys (`training.lr`); checked against the pipeline's JSON Schema when resolved. */
export const OverrideKey = ruleString(SCRIPT_VALUES.overrideKey);
export const OverridesSchema = z.record(OverrideKey, ScalarSchema);
export type StageName = z.infer<typeof Stage>;
