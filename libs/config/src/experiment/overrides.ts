// Overrides (`-O training.lr 0.001`, `lr=0.01`) are checked against the pipeline's own JSON Schema
// (the default pipeline's: its `schema` command's output, checked in at libs/config/schema/pipeline.schema.json; a declared
// pipeline's: its declaration's schema.file or schema.command), so a typo or a
// wrong type is caught before anything is queued.
import { didYouMean } from '../errors.ts';

interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  $defs?: Record<string, JsonSchema>;
  /** Rules across keys (a pipeline schema's own): when `if.key` is `if.equals`, `then.key` must be `then.equals`. */
  'x-requires'?: Requirement[];
}

interface Requirement {
  if: { key: string; equals: unknown };
  then: { key: string; equals: unknown };
  why: string;
}

export interface OverrideProblem {
  key: string;
  message: string;
  expected: string;
  found: string;
}

function resolveRef(root: JsonSchema, s: JsonSchema): JsonSchema {
  let cur = s;
  for (let i = 0; cur.$ref && i < 16; i++) {
    const name = /^#\/\$defs\/(.+)$/.exec(cur.$ref)?.[1];
    const next = name ? root.$defs?.[name] : undefined;
    if (!next) throw new Error(`pipeline schema: unresolvable $ref ${cur.$ref}`);
    cur = { ...next, ...Object.fromEntries(Object.entries(cur).filter(([k]) => k !== '$ref')) };
  }
  if (cur.allOf?.length === 1) return resolveRef(root, { ...cur.allOf[0]!, ...cur, allOf: undefined });
  return cur;
}

function describe(root: JsonSchema, s: JsonSchema): string {
  const r = resolveRef(root, s);
  if (r.enum) return `one of ${r.enum.map((v) => JSON.stringify(v)).join(', ')}`;
  const alts = r.anyOf ?? r.oneOf;
  if (alts) return alts.map((a) => describe(root, a)).join(' or ');
  const t = Array.isArray(r.type) ? r.type.join(' or ') : (r.type ?? 'any value');
  const bounds = [
    r.minimum !== undefined ? `>= ${r.minimum}` : '',
    r.maximum !== undefined ? `<= ${r.maximum}` : '',
    r.exclusiveMinimum !== undefined ? `> ${r.exclusiveMinimum}` : '',
  ].filter(Boolean);
  return `${t === 'null' ? 'null' : `${t === 'integer' ? 'an integer' : t === 'array' ? 'a list' : `a ${t}`}`}${bounds.length ? ` ${bounds.join(' and ')}` : ''}`;
}

function typeOk(t: string, v: unknown): boolean {
  switch (t) {
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'string':
      return typeof v === 'string';
    case 'boolean':
      return typeof v === 'boolean';
    case 'null':
      return v === null;
    case 'array':
      return Array.isArray(v);
    case 'object':
      return typeof v === 'object' && v !== null && !Array.isArray(v);
    default:
      return true;
  }
}

function matches(root: JsonSchema, s: JsonSchema, v: unknown): boolean {
  const r = resolveRef(root, s);
  const alts = r.anyOf ?? r.oneOf;
  if (alts) return alts.some((a) => matches(root, a, v));
  if (r.enum && !r.enum.some((e) => e === v)) return false;
  if (r.const !== undefined && r.const !== v) return false;
  if (r.type !== undefined) {
    const types = Array.isArray(r.type) ? r.type : [r.type];
    if (!types.some((t) => typeOk(t, v))) return false;
  }
  if (typeof v === 'number') {
    if (r.minimum !== undefined && v < r.minimum) return false;
    if (r.maximum !== undefined && v > r.maximum) return false;
    if (r.exclusiveMinimum !== undefined && v <= r.exclusiveMinimum) return false;
    if (r.exclusiveMaximum !== undefined && v >= r.exclusiveMaximum) return false;
  }
  if (Array.isArray(v) && r.items) return v.every((x) => matches(root, r.items!, x));
  return true;
}

/** Every dotted key the schema accepts (leaves only): the candidates for "did you mean". */
export function overrideKeys(schema: JsonSchema): string[] {
  const out: string[] = [];
  const walk = (s: JsonSchema, prefix: string, depth: number) => {
    const r = resolveRef(schema, s);
    if (r.properties && depth < 8) {
      for (const [k, sub] of Object.entries(r.properties))
        walk(sub, prefix ? `${prefix}.${k}` : k, depth + 1);
    } else if (prefix) out.push(prefix);
  };
  walk(schema, '', 0);
  return out;
}

/** Problems of a set of dotted-key overrides against the pipeline schema ([] when all are valid). */
export function validateOverrides(overrides: Record<string, unknown>, schema: JsonSchema): OverrideProblem[] {
  const keys = overrideKeys(schema);
  const problems: OverrideProblem[] = [];
  for (const [key, value] of Object.entries(overrides)) {
    let node: JsonSchema | undefined = resolveRef(schema, schema);
    for (const part of key.split('.')) {
      node = node?.properties?.[part];
      node = node ? resolveRef(schema, node) : undefined;
      if (!node) break;
    }
    if (!node || node.properties) {
      problems.push({
        key,
        message: `unknown pipeline config key \`${key}\`${didYouMean(key, keys)}`,
        expected: "a key of the pipeline's config schema",
        found: JSON.stringify(key),
      });
      continue;
    }
    if (!matches(schema, node, value)) {
      problems.push({
        key,
        message: `${key} = ${JSON.stringify(value)} is not valid for the pipeline`,
        expected: describe(schema, node),
        found: JSON.stringify(value),
      });
    }
  }
  return problems;
}

/**
 * Problems of the schema's rules across keys (`x-requires`) for one set of overrides that apply
 * together (a stage's, with a sweep point's on top): a key not overridden has the pipeline's default.
 * The problem names the key that was written: the rule's condition, or, when the condition is the
 * pipeline's default, the key whose written value breaks it.
 */
export function requirementProblems(
  overrides: Record<string, unknown>,
  schema: JsonSchema,
): OverrideProblem[] {
  const valueOf = (key: string) => (key in overrides ? overrides[key] : overrideDefault(key, schema));
  const problems: OverrideProblem[] = [];
  for (const rule of schema['x-requires'] ?? []) {
    const found = valueOf(rule.then.key);
    if (valueOf(rule.if.key) !== rule.if.equals || found === rule.then.equals) continue;
    const byDefault = !(rule.if.key in overrides);
    problems.push({
      key: byDefault && rule.then.key in overrides ? rule.then.key : rule.if.key,
      message:
        `${rule.if.key} = ${JSON.stringify(rule.if.equals)}${byDefault ? " (the pipeline's default)" : ''} ` +
        `needs ${rule.then.key} = ${JSON.stringify(rule.then.equals)} (${rule.why}); ` +
        `set ${rule.then.key} = ${JSON.stringify(rule.then.equals)}, or choose another ${rule.if.key}`,
      expected: `${rule.then.key} = ${JSON.stringify(rule.then.equals)}`,
      found: `${rule.then.key} = ${JSON.stringify(found)}`,
    });
  }
  return problems;
}

/** The pipeline's default for a dotted key (`data.window_size` -> 100); undefined when it has none. */
export function overrideDefault(key: string, schema: JsonSchema): unknown {
  let node: (JsonSchema & { default?: unknown }) | undefined = resolveRef(schema, schema);
  let parentDefault: unknown;
  for (const part of key.split('.')) {
    const fromParent =
      parentDefault && typeof parentDefault === 'object'
        ? (parentDefault as Record<string, unknown>)[part]
        : undefined;
    const next: JsonSchema | undefined = node?.properties?.[part];
    node = next ? (resolveRef(schema, next) as JsonSchema & { default?: unknown }) : undefined;
    if (!node) return undefined;
    parentDefault = node.default ?? fromParent;
  }
  return parentDefault;
}
