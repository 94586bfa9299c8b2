// The loader: the only part of this library that reads files (specs, the cluster and environment
// files they reference, and the pipeline's JSON Schema).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import type { z } from 'zod';
import { clusterPresets } from '../cluster/presets.ts';
import { ClusterProfileSchema, type ClusterProfile } from '../cluster/schema.ts';
import { environmentPresets } from '../environment/presets.ts';
import { environmentProblems } from '../environment/rules.ts';
import { EnvironmentSpecSchema, type EnvironmentSpec } from '../environment/schema.ts';
import { didYouMean, SpecValidationError, type SpecIssue } from '../errors.ts';
import { resolveExperiment, type ResolvedExperiment } from '../experiment/resolve.ts';
import { ExperimentSpecSchema, type ExperimentSpec } from '../experiment/schema.ts';
import { siteProblems, type SiteView } from '../experiment/site.ts';
import {
  declaredNameProblems,
  DEFAULT_PIPELINE_DECLARATION,
  DEFAULT_PIPELINE_NAME,
  PipelineDeclarationSchema,
  type Pipeline,
  type PipelineDeclaration,
} from '../pipeline/pipeline.ts';
import { keysAt, pathText, zodIssues } from './issues.ts';
import { parseYaml, type PositionedYaml } from './yaml.ts';

const PIPELINE_SCHEMA = new URL('../../schema/pipeline.schema.json', import.meta.url);
let pipelineSchemaCache: object | undefined;

/** The default pipeline's config JSON Schema (its `schema` command's output, checked in). The one reader of it. */
export function loadPipelineSchema(): object {
  pipelineSchemaCache ??= JSON.parse(readFileSync(PIPELINE_SCHEMA, 'utf8')) as object;
  return pipelineSchemaCache;
}

export interface LoadedSpec {
  spec: ExperimentSpec;
  resolved: ResolvedExperiment;
  warnings: string[];
  /** Where a field of the spec is (file, line, col), for checks made after loading. */
  at?: (path: (string | number)[]) => { file?: string; line?: number; col?: number };
}

type Ref<T> = { value?: T; issues: SpecIssue[]; file?: string };

const WHAT_IT_IS = {
  cluster: 'a cluster profile',
  environment: 'an environment spec',
  pipeline: 'a pipeline declaration',
} as const;

function loadReferenced<T>(
  what: keyof typeof WHAT_IT_IS,
  ref: string,
  baseDir: string,
  presets: Record<string, T>,
  schema: z.ZodType<T>,
  where: { file?: string; line?: number; col?: number },
): Ref<T> {
  if (ref in presets) return { value: presets[ref]!, issues: [] };
  const expected = `one of ${Object.keys(presets).join(', ')}, or a path to a .yaml/.yml file`;
  const refused = (message: string): Ref<T> => ({
    issues: [{ ...where, path: what, message, expected, found: JSON.stringify(ref) }],
  });
  // Only YAML files are read: a path to anything else (a system file, a binary) is never opened,
  // so its contents cannot end up in an error message.
  if (!/\.ya?ml$/i.test(ref)) {
    return refused(
      /[/\\]/.test(ref)
        ? `"${ref}" is not a ${what} file: ${what} files end in .yaml or .yml`
        : `"${ref}" is not a ${what} preset${didYouMean(ref, Object.keys(presets))}`,
    );
  }
  const file = isAbsolute(ref) ? ref : resolve(baseDir, ref);
  if (!existsSync(file) || !statSync(file).isFile()) return refused(`${what} file ${file} does not exist`);
  const text = readFileSync(file, 'utf8');
  const yaml = parseYaml(text, file);
  if (yaml.syntaxIssues.length > 0) return { issues: yaml.syntaxIssues }; // positions, never the text
  // A file that is not a mapping with at least one field of the schema is not a profile at all:
  // say so, without quoting it.
  const known = topLevelKeys(schema);
  const value = yaml.value;
  if (
    value === null ||
    typeof value !== 'object' ||
    Array.isArray(value) ||
    (known.length > 0 && !Object.keys(value).some((k) => known.includes(k)))
  ) {
    return refused(
      `${file} is not ${WHAT_IT_IS[what]}: expected a YAML mapping with fields such as ${known.slice(0, 4).join(', ')}`,
    );
  }
  const r = schema.safeParse(value);
  if (!r.success) return { issues: zodIssues(r.error, value, schema, yaml, file) };
  return { value: r.data, issues: [], file };
}

/** The fields of an object schema, or of every option of a union (the environment backends). */
function topLevelKeys(schema: z.ZodType): string[] {
  const def = (schema as unknown as { _zod: { def: { type: string; options?: z.ZodType[] } } })._zod.def;
  if (def.type === 'union') return [...new Set((def.options ?? []).flatMap((o) => keysAt(o, [])))];
  return keysAt(schema, []);
}

/** The default pipeline: its declaration, with the config schema its package wrote. */
export function defaultPipeline(): Pipeline {
  const { code: _none, schema: _file, ...rest } = DEFAULT_PIPELINE_DECLARATION;
  return { ...rest, codePaths: ['src'], configSchema: loadPipelineSchema() };
}

/**
 * A pipeline by name (the default's) or by its declaration file, with its code dir and config schema
 * resolved beside the file. Problems are reported at `where` (the spec's `pipeline:` field).
 */
function loadPipelineRef(
  ref: string,
  baseDir: string,
  where: { file?: string; line?: number; col?: number },
): Ref<Pipeline> {
  const presets: Record<string, PipelineDeclaration> = {
    [DEFAULT_PIPELINE_NAME]: DEFAULT_PIPELINE_DECLARATION,
  };
  if (ref === DEFAULT_PIPELINE_NAME) return { value: defaultPipeline(), issues: [] };
  const loaded = loadReferenced(
    'pipeline',
    ref,
    baseDir,
    presets,
    PipelineDeclarationSchema as z.ZodType<PipelineDeclaration>,
    where,
  );
  if (!loaded.value || !loaded.file) return { issues: loaded.issues };
  const decl = loaded.value;
  const dir = dirname(loaded.file);
  const issues: SpecIssue[] = [];
  const refused = (path: string, message: string, found: string, expected: string): void => {
    issues.push({ ...where, path, message, expected, found });
  };
  if (decl.name === DEFAULT_PIPELINE_NAME)
    refused(
      'pipeline',
      `${loaded.file} declares the name ${DEFAULT_PIPELINE_NAME}, which is the built-in pipeline's`,
      JSON.stringify(decl.name),
      'another name',
    );
  let codeDir: string | undefined;
  if (decl.code?.path !== undefined) {
    codeDir = resolve(dir, decl.code.path);
    if (!existsSync(codeDir) || !statSync(codeDir).isDirectory())
      refused(
        'pipeline',
        `pipeline ${decl.name}: code.path ${decl.code.path} is not a directory (resolved: ${codeDir})`,
        JSON.stringify(decl.code.path),
        'a directory, relative to the declaration file',
      );
    else
      for (const entry of decl.code.pythonPath) {
        const p = resolve(codeDir, entry);
        if (!existsSync(p) || !statSync(p).isDirectory())
          refused(
            'pipeline',
            `pipeline ${decl.name}: code.pythonPath entry ${entry} is not a directory of ${codeDir}`,
            JSON.stringify(entry),
            'a directory inside code.path',
          );
      }
  }
  let configSchema: object | undefined;
  if (decl.schema && 'file' in decl.schema) {
    const file = resolve(dir, decl.schema.file);
    try {
      configSchema = jsonObject(readFileSync(file, 'utf8'));
    } catch (e) {
      refused(
        'pipeline',
        `pipeline ${decl.name}: schema.file ${file} could not be read as a JSON Schema (${(e as Error).message.split('\n')[0]})`,
        JSON.stringify(decl.schema.file),
        'a JSON Schema file, relative to the declaration file',
      );
    }
  } else if (decl.schema && 'command' in decl.schema && !issues.length) {
    const cwd = codeDir ?? dir;
    const printed = schemaFromCommand(
      decl.schema.command,
      cwd,
      (decl.code?.pythonPath ?? []).map((p) => resolve(cwd, p)),
    );
    if ('schema' in printed) configSchema = printed.schema;
    else
      refused(
        'pipeline',
        `pipeline ${decl.name}: schema.command (run in ${cwd}) ${printed.problem}`,
        JSON.stringify(decl.schema.command),
        'a command that prints the JSON Schema of the config on stdout and exits 0',
      );
  }
  if (issues.length) return { issues };
  const { code: _code, schema: _schema, ...rest } = decl;
  return {
    value: {
      ...rest,
      codePaths: decl.code?.pythonPath ?? [],
      ...(codeDir ? { codeDir } : {}),
      ...(decl.code?.git ? { codeGit: decl.code.git } : {}),
      ...(configSchema ? { configSchema } : {}),
    },
    issues: [],
  };
}

function jsonObject(text: string): object {
  const parsed: unknown = JSON.parse(text);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new Error('not a JSON object');
  return parsed;
}

/** Runs a declaration's `schema.command` and reads what it prints (bounded: 60 s, 16 MB). */
function schemaFromCommand(
  argv: string[],
  cwd: string,
  pythonPath: string[],
): { schema: object } | { problem: string } {
  const env = { ...process.env };
  if (pythonPath.length) env['PYTHONPATH'] = [...pythonPath, env['PYTHONPATH']].filter(Boolean).join(':');
  const r = spawnSync(argv[0]!, argv.slice(1), {
    cwd,
    env,
    encoding: 'utf8',
    timeout: 60_000,
    maxBuffer: 16 << 20,
  });
  if (r.error) return { problem: `could not run: ${r.error.message}` };
  if (r.status !== 0) {
    const why = (r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ');
    return { problem: `exited with ${r.status ?? `signal ${r.signal}`}${why ? `: ${why}` : ''}` };
  }
  try {
    return { schema: jsonObject(r.stdout) };
  } catch (e) {
    return { problem: `printed no JSON Schema (${(e as Error).message.split('\n')[0]})` };
  }
}

/** A pipeline by name or declaration file, validated (the runner's and the tests' entry). */
export function loadPipeline(ref: string, baseDir = process.cwd()): Pipeline {
  const r = loadPipelineRef(ref, baseDir, {});
  if (!r.value) throw new SpecValidationError(r.issues, `pipeline ${ref}`);
  return r.value;
}

/**
 * Loads, validates and resolves an experiment spec. Every problem is reported at once in a
 * SpecValidationError (file:line:col, field, expected, found); nothing is returned half-checked.
 */
export function loadExperimentSpec(
  source: string | { text: string; file?: string },
  /**
   * Resolve against this cluster instead of the one the spec names (`train --cluster`: another
   * cluster of the site); the spec's partitions, budget and environment are checked against it.
   */
  options: { cluster?: ClusterProfile } = {},
): LoadedSpec {
  const file = typeof source === 'string' ? resolve(source) : source.file;
  const text = typeof source === 'string' ? readFileSync(file!, 'utf8') : source.text;
  const baseDir = file ? dirname(file) : process.cwd();
  const yaml = parseYaml(text, file);
  if (yaml.syntaxIssues.length) throw new SpecValidationError(yaml.syntaxIssues, file ?? 'spec');
  return validateExperiment(yaml.value, {
    file,
    yaml,
    baseDir,
    ...(options.cluster ? { cluster: options.cluster } : {}),
  });
}

/** Validates an already-parsed spec object (property tests, callers that build specs in code). */
export function validateExperiment(
  value: unknown,
  ctx: { file?: string; yaml?: PositionedYaml; baseDir?: string; cluster?: ClusterProfile } = {},
): LoadedSpec {
  const { file, yaml } = ctx;
  const at = (path: (string | number)[]) => ({
    ...(file ? { file } : {}),
    ...(yaml?.positionOf(path) ?? {}),
  });
  const parsed = ExperimentSpecSchema.safeParse(value);
  const issues: SpecIssue[] = parsed.success
    ? []
    : zodIssues(parsed.error, value, ExperimentSpecSchema, yaml, file);

  // Cluster and environment are resolved even when other fields are wrong, to report all at once.
  const obj = (value && typeof value === 'object' ? value : {}) as Record<string, unknown>;
  const baseDir = ctx.baseDir ?? process.cwd();
  const cluster = ctx.cluster
    ? { value: ctx.cluster, issues: [] }
    : typeof obj['cluster'] === 'string'
      ? loadReferenced(
          'cluster',
          obj['cluster'],
          baseDir,
          clusterPresets,
          ClusterProfileSchema as z.ZodType<ClusterProfile>,
          at(['cluster']),
        )
      : { issues: [] };
  const environment =
    typeof obj['environment'] === 'string'
      ? loadReferenced(
          'environment',
          obj['environment'],
          baseDir,
          environmentPresets,
          EnvironmentSpecSchema as z.ZodType<EnvironmentSpec>,
          at(['environment']),
        )
      : { issues: [] };
  const pipeline =
    typeof obj['pipeline'] === 'string'
      ? loadPipelineRef(obj['pipeline'], baseDir, at(['pipeline']))
      : { value: defaultPipeline(), issues: [] };
  issues.push(...cluster.issues, ...environment.issues, ...pipeline.issues);
  if (environment.value) {
    for (const p of environmentProblems(environment.value))
      issues.push({ ...at(['environment']), path: `environment.${pathText(p.path)}`, message: p.message });
  }
  // A stage's own environment, loaded once per reference written.
  const stageEnvironments: Record<string, EnvironmentSpec> = {};
  const stages = Array.isArray(obj['stages']) ? (obj['stages'] as unknown[]) : [];
  stages.forEach((st, i) => {
    const ref = st && typeof st === 'object' ? (st as Record<string, unknown>)['environment'] : undefined;
    if (typeof ref !== 'string' || ref in stageEnvironments) return;
    const where = ['stages', i, 'environment'];
    const loaded = loadReferenced(
      'environment',
      ref,
      baseDir,
      environmentPresets,
      EnvironmentSpecSchema as z.ZodType<EnvironmentSpec>,
      at(where),
    );
    issues.push(...loaded.issues);
    if (!loaded.value) return;
    for (const p of environmentProblems(loaded.value))
      issues.push({ ...at(where), path: `${pathText(where)}.${pathText(p.path)}`, message: p.message });
    stageEnvironments[ref] = loaded.value;
  });
  if (pipeline.value) {
    const declared = pipeline.value;
    stages.forEach((st, i) => {
      if (!st || typeof st !== 'object') return;
      for (const p of declaredNameProblems(declared, st as Record<string, unknown>, i))
        issues.push({
          ...at(p.path),
          path: pathText(p.path),
          message: p.message,
          expected: p.expected,
          found: p.found,
        });
    });
  }
  if (!parsed.success || !cluster.value || !environment.value || !pipeline.value) {
    throw new SpecValidationError(sortIssues(issues), file ?? 'spec');
  }
  const { resolved, problems, warnings } = resolveExperiment(
    parsed.data,
    cluster.value,
    environment.value,
    pipeline.value,
    stageEnvironments,
  );
  for (const p of problems)
    issues.push({
      ...at(p.path),
      path: pathText(p.path),
      message: p.message,
      ...(p.expected ? { expected: p.expected } : {}),
      ...(p.found !== undefined ? { found: p.found } : {}),
    });
  if (issues.length) throw new SpecValidationError(sortIssues(issues), file ?? 'spec');
  return { spec: parsed.data, resolved, warnings, at };
}

/**
 * The checks that need the site (the stack's cache dirs): run once the stack is known, they are
 * reported like every other spec problem (file:line, field, expected, found).
 */
export function checkSpecAgainstSite(loaded: LoadedSpec, site: SiteView): void {
  const problems = siteProblems(loaded.resolved, site);
  if (problems.length === 0) return;
  const issues: SpecIssue[] = problems.map((p) => ({
    ...(loaded.at?.(p.path) ?? {}),
    path: pathText(p.path),
    message: p.message,
    ...(p.expected ? { expected: p.expected } : {}),
    ...(p.found !== undefined ? { found: p.found } : {}),
  }));
  throw new SpecValidationError(sortIssues(issues), loaded.at?.([]).file ?? 'spec');
}

function sortIssues(issues: SpecIssue[]): SpecIssue[] {
  return [...issues].sort((a, b) => (a.line ?? 1e9) - (b.line ?? 1e9) || (a.col ?? 0) - (b.col ?? 0));
}

/** A cluster profile by preset name or YAML file, validated. */
export function loadClusterProfile(ref: string, baseDir = process.cwd()): ClusterProfile {
  const r = loadReferenced(
    'cluster',
    ref,
    baseDir,
    clusterPresets,
    ClusterProfileSchema as z.ZodType<ClusterProfile>,
    {},
  );
  if (!r.value) throw new SpecValidationError(r.issues, `cluster ${ref}`);
  return r.value;
}

/** An environment spec by preset name or YAML file, validated against the schema and the rules. */
export function loadEnvironmentSpec(ref: string, baseDir = process.cwd()): EnvironmentSpec {
  const r = loadReferenced(
    'environment',
    ref,
    baseDir,
    environmentPresets,
    EnvironmentSpecSchema as z.ZodType<EnvironmentSpec>,
    {},
  );
  if (!r.value) throw new SpecValidationError(r.issues, `environment ${ref}`);
  const problems = environmentProblems(r.value);
  if (problems.length)
    throw new SpecValidationError(
      problems.map((p) => ({ path: pathText(p.path), message: p.message })),
      `environment ${ref}`,
    );
  return r.value;
}
