// zod issues -> SpecIssues with positions, expected/found, and "did you mean" for near-miss keys.
import type { z } from 'zod';
import { didYouMean, nearest, type SpecIssue } from '../errors.ts';
import type { PositionedYaml } from './yaml.ts';

type Path = (string | number)[];

export function pathText(path: readonly PropertyKey[]): string {
  return path
    .map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`))
    .join('');
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let cur = root;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[p as string];
  }
  return cur;
}

const SECRET_KEYS = /privateKey$/i;

function show(v: unknown, path: readonly PropertyKey[]): string {
  if (path.some((p) => SECRET_KEYS.test(String(p)))) return '<secret>';
  if (v === undefined) return 'nothing';
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** Allowed keys of the object schema at `path` (unwrapping optional/default/array/record). */
export function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let cur: unknown = schema;
  const unwrap = (s: unknown): unknown => {
    for (let i = 0; i < 10; i++) {
      const def = (s as { _zod?: { def?: Record<string, unknown> } })?._zod?.def;
      if (!def) return s;
      if (def['innerType']) s = def['innerType'];
      else if (def['type'] === 'pipe' && def['in']) s = def['in'];
      else return s;
    }
    return s;
  };
  for (const p of path) {
    cur = unwrap(cur);
    const def = (cur as { _zod: { def: Record<string, unknown> } })._zod.def;
    if (def['type'] === 'object') cur = (def['shape'] as Record<string, unknown>)[String(p)];
    else if (def['type'] === 'array') cur = def['element'];
    else if (def['type'] === 'record') cur = def['valueType'];
    else return [];
    if (!cur) return [];
  }
  cur = unwrap(cur);
  const def = (cur as { _zod?: { def?: Record<string, unknown> } })?._zod?.def;
  return def?.['type'] === 'object' ? Object.keys(def['shape'] as object) : [];
}

/** zod's type names in a spec writer's words. */
const KIND_WORDS: Record<string, string> = {
  string: 'text',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  object: 'a mapping (key: value lines)',
  array: 'a list',
  record: 'a mapping (key: value lines)',
  null: 'null',
};

function expectedOf(issue: z.core.$ZodIssue): string | undefined {
  const i = issue as z.core.$ZodIssue & { expected?: string; values?: unknown[]; minimum?: unknown; maximum?: unknown; format?: string; pattern?: string };
  switch (i.code) {
    case 'invalid_type':
      return i.expected === undefined ? undefined : (KIND_WORDS[i.expected] ?? i.expected);
    case 'invalid_value':
      return `one of ${(i.values ?? []).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'too_small':
      return `${(i as { inclusive?: boolean }).inclusive === false ? '>' : '>='} ${String(i.minimum)}`;
    case 'too_big':
      return `${(i as { inclusive?: boolean }).inclusive === false ? '<' : '<='} ${String(i.maximum)}`;
    case 'invalid_format':
      return i.message;
    default:
      return undefined;
  }
}

export function zodIssues(
  error: z.ZodError,
  input: unknown,
  schema: z.ZodType,
  yaml: PositionedYaml | undefined,
  file: string | undefined,
  prefix: Path = [],
): SpecIssue[] {
  const out: SpecIssue[] = [];
  // A misspelt required key shows up twice (unknown `datset`, missing `dataset`): report it once.
  const misspelt = new Set<string>();
  for (const issue of error.issues) {
    if (issue.code !== 'unrecognized_keys') continue;
    const allowed = keysAt(schema, issue.path);
    for (const key of issue.keys) {
      const n = nearest(key, allowed);
      if (n) misspelt.add(pathText([...prefix, ...(issue.path as Path), n]));
    }
  }
  for (const issue of error.issues) {
    const path = [...prefix, ...(issue.path as Path)];
    if (issue.code === 'unrecognized_keys') {
      const allowed = keysAt(schema, issue.path);
      for (const key of issue.keys) {
        const p = yaml?.keyPositionOf([...path, key]);
        out.push({
          ...(file ? { file } : {}),
          ...(p ?? {}),
          path: pathText([...path, key]),
          message: `unknown key \`${key}\`${didYouMean(key, allowed)}`,
          expected: allowed.length ? `one of ${allowed.join(', ')}` : 'no such key',
          found: JSON.stringify(key),
        });
      }
      continue;
    }
    if (issue.code === 'invalid_key') {
      const key = String(issue.path[issue.path.length - 1]);
      const inner = (issue as { issues?: { message: string }[] }).issues?.[0]?.message;
      const p = yaml?.keyPositionOf(path);
      out.push({
        ...(file ? { file } : {}),
        ...(p ?? {}),
        path: pathText(path),
        message: `key \`${key}\` is not valid here`,
        expected: inner ?? 'a valid key',
        found: JSON.stringify(key),
      });
      continue;
    }
    const found = valueAt(input, issue.path);
    if (issue.code === 'invalid_type' && found === undefined && misspelt.has(pathText(path))) continue;
    const p = yaml?.positionOf(path);
    const expected = expectedOf(issue);
    const message =
      issue.code === 'invalid_type' && found === undefined
        ? `required field is missing`
        : issue.code === 'invalid_type'
          ? `${show(found, path)} is the wrong kind of value`
          : issue.code === 'custom'
            ? issue.message
            : issue.code === 'invalid_format'
              ? `${show(found, path)} is not valid here`
              : issue.code === 'invalid_value'
                ? `${show(found, path)} is not an allowed value`
                : issue.code === 'too_small' || issue.code === 'too_big'
                  ? `${show(found, path)} is out of range`
                  : `${show(found, path)} is not valid here (${issue.message.replace(/^Invalid input: /, '')})`;
    out.push({
      ...(file ? { file } : {}),
      ...(p ?? {}),
      path: pathText(path),
      message,
      ...(expected ? { expected } : {}),
      ...(issue.code !== 'custom' || found !== undefined ? { found: show(found, path) } : {}),
    });
  }
  return out;
}
