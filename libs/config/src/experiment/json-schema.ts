import { z } from 'zod';
import { ExperimentSpecSchema } from './schema.ts';

/** The editor-facing JSON Schema of an experiment spec (what a user writes: defaults are optional). */
export function experimentJsonSchema(): object {
  return {
    ...z.toJSONSchema(ExperimentSpecSchema, { io: 'input', unrepresentable: 'any' }),
    title: 'kdgat-hpc experiment spec',
  };
}
