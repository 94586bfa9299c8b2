// Regenerates schema/experiment.schema.json from the zod schema: `nx run config:schema`.
import { writeFileSync } from 'node:fs';
import { experimentJsonSchema } from '../src/experiment/json-schema.ts';

const out = new URL('../schema/experiment.schema.json', import.meta.url);
writeFileSync(out, `${JSON.stringify(experimentJsonSchema(), null, 2)}\n`);
console.log(`wrote ${out.pathname}`);
