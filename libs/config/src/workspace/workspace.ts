// The workspace: the folder of a researcher's own repository (or of this one's examples) that holds
// their stacks, specs, pipeline and environment declarations. Found as git and Nx find their roots:
// `--workspace DIR`, else $KDGAT_HPC_WORKSPACE, else the first `kdgat-hpc.yaml` in the current
// directory or above. Every relative path a stack declares resolves against its root, its Pulumi
// state and the runner's local copies (`.hpc/`) live in it, and nothing of the tool's own checkout
// is written.
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { z } from 'zod';
import { SpecValidationError } from '../errors.ts';
import { parseYaml } from '../load/yaml.ts';

/** The file that marks a workspace's root. */
export const WORKSPACE_FILE = 'kdgat-hpc.yaml';
/** The environment variable naming a workspace (what `--workspace` sets for child processes). */
export const WORKSPACE_VARIABLE = 'KDGAT_HPC_WORKSPACE';

const relativeDir = z
  .string()
  .min(1)
  .refine((p) => !isAbsolute(p) && !p.split('/').includes('..'), {
    message: 'a folder inside the workspace, relative to it (no leading / and no ..)',
  });

export const WorkspaceFileSchema = z
  .object({
    /** The folder of the stack files, `<stacks>/<stack>.yaml` (Pulumi stack config). */
    stacks: relativeDir.default('stacks'),
    /** The Pulumi file backend's folder (the stacks' state). */
    state: relativeDir.default('.hpc/pulumi-state'),
  })
  .strict();

export type WorkspaceFile = z.infer<typeof WorkspaceFileSchema>;

export interface Workspace {
  /** The folder holding `kdgat-hpc.yaml`: every relative path of the workspace resolves against it. */
  root: string;
  /** Its `kdgat-hpc.yaml`. */
  file: string;
  /** Where its stack files are (`<stack>.yaml`). */
  stacksDir: string;
  /** Its Pulumi state (a file backend). */
  stateDir: string;
  /** The runner's local files: copies of a site's runs, plans, pipelines' git checkouts, logs. */
  hpcDir: string;
  /** How it was found, for messages. */
  foundBy: '--workspace' | typeof WORKSPACE_VARIABLE | 'found' | 'default';
}

export class WorkspaceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WorkspaceError';
  }
}

/** Reads and validates a workspace file; every problem names the field, the value and what was expected. */
export function readWorkspace(root: string, foundBy: Workspace['foundBy']): Workspace {
  const file = join(root, WORKSPACE_FILE);
  const yaml = parseYaml(readFileSync(file, 'utf8'), file);
  if (yaml.syntaxIssues.length > 0) throw new SpecValidationError(yaml.syntaxIssues, `workspace ${file}`);
  const parsed = WorkspaceFileSchema.safeParse(yaml.value ?? {});
  if (!parsed.success) {
    throw new SpecValidationError(
      parsed.error.issues.map((i) => ({
        file,
        path: i.path.join('.'),
        message: i.message,
        expected: 'stacks: FOLDER and state: FOLDER, relative to the workspace (both optional)',
        found: JSON.stringify(valueAt(yaml.value, i.path) ?? null),
      })),
      `workspace ${file}`,
    );
  }
  return {
    root,
    file,
    stacksDir: join(root, parsed.data.stacks),
    stateDir: join(root, parsed.data.state),
    hpcDir: join(root, '.hpc'),
    foundBy,
  };
}

function valueAt(v: unknown, path: readonly PropertyKey[]): unknown {
  let cur = v;
  for (const k of path)
    cur = cur && typeof cur === 'object' ? (cur as Record<PropertyKey, unknown>)[k] : undefined;
  return cur;
}

/** The first folder at or above `start` holding a workspace file, or undefined. */
export function findWorkspaceRoot(start: string): string | undefined {
  let dir = resolve(start);
  for (;;) {
    if (existsSync(join(dir, WORKSPACE_FILE))) return dir;
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/**
 * The workspace a command works in: `explicit` (`--workspace`), else `$KDGAT_HPC_WORKSPACE`, else the
 * first workspace file at or above `cwd`, else `fallback` (the tool's own checkout, whose examples
 * are a workspace of the same shape). A folder named explicitly must hold a workspace file.
 */
export function resolveWorkspace(opts: {
  explicit?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  fallback?: string;
}): Workspace {
  const cwd = opts.cwd ?? process.cwd();
  const named: [string | undefined, Workspace['foundBy']][] = [
    [opts.explicit, '--workspace'],
    [(opts.env ?? process.env)[WORKSPACE_VARIABLE], WORKSPACE_VARIABLE],
  ];
  for (const [dir, by] of named) {
    if (dir === undefined || dir === '') continue;
    const root = resolve(cwd, dir);
    if (!existsSync(root) || !statSync(root).isDirectory())
      throw new WorkspaceError(
        `${by} ${dir}: no such directory (expected a folder holding ${WORKSPACE_FILE})`,
      );
    if (!existsSync(join(root, WORKSPACE_FILE)))
      throw new WorkspaceError(
        `${by} ${dir}: ${root} holds no ${WORKSPACE_FILE}: make one with \`kdgat-runner init ${dir}\``,
      );
    return readWorkspace(root, by);
  }
  const found = findWorkspaceRoot(cwd);
  if (found !== undefined) return readWorkspace(found, 'found');
  if (opts.fallback !== undefined && existsSync(join(opts.fallback, WORKSPACE_FILE)))
    return readWorkspace(opts.fallback, 'default');
  throw new WorkspaceError(
    `no ${WORKSPACE_FILE} in ${cwd} or above: make one with \`kdgat-runner init\` (or pass --workspace DIR)`,
  );
}

let current: string | undefined;

/**
 * The workspace this process works in (the runner's command sets it): what its declarations name
 * relatively — an environment's `pipelineLock.file` — is read from there.
 */
export function useWorkspace(ws: Workspace | undefined): void {
  current = ws?.root;
}

/** The root relative declared files resolve against: the one in use, else $KDGAT_HPC_WORKSPACE (infra). */
export function workspaceRootInUse(): string | undefined {
  return current ?? (process.env[WORKSPACE_VARIABLE] || undefined);
}

/** A stack's config file in the workspace. */
export function stackFileOf(ws: Workspace, stack: string): string {
  return join(ws.stacksDir, `${stack}.yaml`);
}

/** A path of the workspace as the user reads it (relative to the root). */
export function inWorkspace(ws: Workspace, path: string): string {
  const rel = relative(ws.root, path);
  return rel === '' || rel.startsWith('..') || isAbsolute(rel) ? path : rel;
}

/**
 * `<workspace>/.hpc`, made on first use with a `.gitignore` of `*`: what the runner keeps there is
 * never committed, whatever the researcher's own `.gitignore` says, and theirs is never edited.
 */
export function ensureHpcDir(ws: Workspace): string {
  mkdirSync(ws.hpcDir, { recursive: true });
  const ignore = join(ws.hpcDir, '.gitignore');
  if (!existsSync(ignore))
    writeFileSync(ignore, "# kdgat-hpc: the runner's local files (copies of runs, plans, state)\n*\n");
  return ws.hpcDir;
}
