// The spec a run is made from: read from its file. Loading it (@kdgat/config's loadExperimentSpec)
// checks every stage's overrides and sweep point against the pipeline's schema, with positions.
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** `--spec FILE`: its absolute path and text. */
export function readSpecFile(path: string): { file: string; text: string } {
  const file = resolve(path);
  if (!existsSync(file)) throw new Error(`--spec ${path}: no such file`);
  return { file, text: readFileSync(file, 'utf8') };
}
