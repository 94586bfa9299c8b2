// study.json, the contract between `runner tune` (which writes it) and the default pipeline's `tune` helper (whose
// workers read it). Python owns it: pydantic `StudyConfig` in the default pipeline's `tune/study.py`, whose JSON
// Schema its `schema study` command exports to libs/config/schema/study.schema.json (checked in; a
// test keeps it fresh). Here the validator is built from that schema, and the spec's `tune:` section
// takes its bounds and defaults from it, so the two cannot disagree.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { SITE_HELPER_MODULE } from '../pipeline/default-package.ts';
import type { Scalar } from './primitives.ts';
import type { ResolvedTune } from './tune.ts';

export const STUDY_SCHEMA_FILE = new URL('../../schema/study.schema.json', import.meta.url);

interface StudyProperty {
  anyOf?: StudyProperty[];
  type?: string;
  minimum?: number;
  maximum?: number;
  default?: unknown;
  pattern?: string;
}
interface StudyJsonSchema {
  properties: Record<string, StudyProperty>;
  $defs: Record<string, { properties: Record<string, StudyProperty> }>;
}

/** The checked-in JSON Schema of study.json (`python -m <SITE_HELPER_MODULE> schema study`). */
export const STUDY_SCHEMA = JSON.parse(readFileSync(STUDY_SCHEMA_FILE, 'utf8')) as StudyJsonSchema;

/** A property of the study schema: `nTrials` (top level) or `HyperbandSpec.minResource` (a definition's). */
export function studyProperty(path: string): StudyProperty {
  const [a, b] = path.split('.') as [string, string | undefined];
  const prop = b === undefined ? STUDY_SCHEMA.properties[a] : STUDY_SCHEMA.$defs[a]?.properties[b];
  if (!prop)
    throw new Error(
      `${STUDY_SCHEMA_FILE.pathname} has no property ${path}: regenerate it (python -m ${SITE_HELPER_MODULE} schema study)`,
    );
  // An optional field (`int | None`): the bounds are the non-null member's.
  const value = prop.anyOf?.find((m) => m.type !== 'null');
  return value ? { ...value, ...('default' in prop ? { default: prop.default } : {}) } : prop;
}

/** An integer with the study schema's bounds for `path`. */
export function studyInt(path: string): z.ZodNumber {
  const p = studyProperty(path);
  if (p.type !== 'integer')
    throw new Error(`study schema: ${path} is ${p.type ?? 'untyped'}, not an integer`);
  let n = z.number().int();
  if (p.minimum !== undefined) n = n.min(p.minimum);
  if (p.maximum !== undefined) n = n.max(p.maximum);
  return n;
}

/** A number with the study schema's bounds for `path`. */
export function studyNumber(path: string): z.ZodNumber {
  const p = studyProperty(path);
  let n = z.number();
  if (p.minimum !== undefined) n = n.min(p.minimum);
  if (p.maximum !== undefined) n = n.max(p.maximum);
  return n;
}

/** The study schema's default for `path` (it must have one). */
export function studyDefault<T>(path: string): T {
  const p = studyProperty(path);
  if (!('default' in p)) throw new Error(`study schema: ${path} has no default`);
  return p.default as T;
}

/** What study.json holds: the resolved search plus the tuned stage and where the study's run lives. */
export type StudyConfig = Pick<
  ResolvedTune,
  | 'study'
  | 'space'
  | 'objective'
  | 'nTrials'
  | 'nWorkers'
  | 'pruner'
  | 'sampler'
  | 'heartbeatSeconds'
  | 'staleAfterSeconds'
  | 'maxRetries'
> & {
  experiment: string;
  stageId: string;
  stage: string;
  model: string;
  scale: string;
  dataset: string;
  overrides: Record<string, Scalar>;
  inputsRoot: string;
  runDir: string;
};

let validator: z.ZodType | undefined;

/** `config` as the workers will read it, or an error naming each field the study schema refuses. */
export function validateStudyConfig(config: StudyConfig): StudyConfig {
  validator ??= z.fromJSONSchema(STUDY_SCHEMA as unknown as Parameters<typeof z.fromJSONSchema>[0]);
  const r = validator.safeParse(config);
  if (!r.success)
    throw new Error(
      `study.json would not be accepted by the tune workers (${STUDY_SCHEMA_FILE.pathname}): ${r.error.issues
        .map((i) => `${i.path.join('.') || '(top)'}: ${i.message}`)
        .join('; ')}`,
    );
  return config;
}
