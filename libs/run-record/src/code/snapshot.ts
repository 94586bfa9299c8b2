// The pipeline's code as a run takes it to a site: the tracked tree of its directory (the default pipeline's:
// `python/` of this repository; a declared pipeline's: its `code.path`, in whatever git repository
// holds it), named by its git tree hash (content-addressed: the same code is uploaded once and
// reused by later runs). A working tree with changes there is refused unless the user allows it;
// then the snapshot is the working tree as git would commit it, and the diff against HEAD is kept
// with the run.
import { existsSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { CURRENT_CODE_LINK } from '@kdgat/config';
import { runCommand } from '@kdgat/schedulers';
import type { SiteFiles } from '@kdgat/transport';

/** The default pipeline's directory of this repository, the code that travels by default. */
export const CODE_PATH = 'python';

/** Where the code that travels is: a git repository and a directory of it (`.` for all of it). */
export interface CodeSource {
  repo: string;
  path: string;
}

/**
 * The source of a pipeline's code: the default pipeline's `python/` of `repoRoot`, or a declared pipeline's
 * directory, inside the git repository that holds it (refused when none does: a site receives a
 * committed tree, never a copy of whatever is on disk).
 */
export async function codeSourceOf(repoRoot: string, codeDir?: string): Promise<CodeSource> {
  if (codeDir === undefined) return { repo: repoRoot, path: CODE_PATH };
  const r = await runCommand('git', ['rev-parse', '--show-toplevel'], { cwd: codeDir });
  if (r.code !== 0)
    throw new Error(
      `the pipeline's code ${codeDir} is not in a git repository: a site over SSH receives a committed ` +
        `tree of it (git init and commit it, or run on the site itself with connection: local)`,
    );
  const repo = r.stdout.trim();
  const path = relative(realpathSync(repo), realpathSync(codeDir));
  return { repo, path: path === '' ? '.' : path };
}
/** Where a run keeps the diff of a dirty snapshot (relative to its run dir). */
export const CODE_DIFF_FILE = 'code.diff';

export interface CodeSnapshot {
  /** git tree hash of `python/` as it travels. */
  tree: string;
  /** HEAD when the snapshot was taken. */
  commit: string;
  /** The working tree differed from HEAD under python/ (allowed with --allow-dirty). */
  dirty: boolean;
  /** `git diff HEAD -- python/` of a dirty snapshot (new files included). */
  diff?: string;
}

export class DirtyTreeError extends Error {
  constructor(changed: string[], path: string = CODE_PATH) {
    super(
      `the working tree has changes under ${path}/ that no commit holds (${changed.slice(0, 5).join(', ')}` +
        `${changed.length > 5 ? `, … ${changed.length} files` : ''}): commit them, or pass --allow-dirty to ` +
        `send the working tree as it is (its diff is kept in the run directory and named in the manifest)`,
    );
    this.name = 'DirtyTreeError';
  }
}

async function git(repo: string, args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
  const r = await runCommand('git', args, { cwd: repo, ...(env ? { env: { ...process.env, ...env } } : {}) });
  if (r.code !== 0) throw new Error(`git ${args.join(' ')} failed in ${repo}: ${r.stderr.trim()}`);
  return r.stdout;
}

/**
 * A declared pipeline's code as a git repository at a commit (`code.git`): cloned once into
 * `<repoRoot>/.hpc/pipelines/<name>/<commit>` and checked out at exactly that commit; a later run
 * reuses the clone. Its committed tree is what travels to a site over SSH, as any code's does.
 */
export async function materializeGitCode(
  repoRoot: string,
  name: string,
  source: { url: string; commit: string },
  log: (line: string) => void = () => {},
): Promise<string> {
  const dir = join(repoRoot, '.hpc', 'pipelines', name, source.commit);
  if (existsSync(join(dir, '.git'))) {
    const head = await runCommand('git', ['rev-parse', 'HEAD'], { cwd: dir });
    if (head.code === 0 && head.stdout.trim() === source.commit) return dir;
    rmSync(dir, { recursive: true, force: true }); // not that commit (a clone cut short): again
  }
  const partial = `${dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(dirname(dir), { recursive: true });
  try {
    const clone = await runCommand('git', ['clone', '--quiet', '--no-checkout', '--', source.url, partial]);
    if (clone.code !== 0)
      throw new Error(`pipeline ${name}: git clone ${source.url} failed: ${clone.stderr.trim()}`);
    const checkout = await runCommand('git', ['checkout', '--quiet', '--detach', source.commit], { cwd: partial });
    if (checkout.code !== 0)
      throw new Error(
        `pipeline ${name}: commit ${source.commit} is not in ${source.url} (on none of its branches or tags): ` +
          `${checkout.stderr.trim()}`,
      );
    renameSync(partial, dir);
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
  log(`code: pipeline ${name} at ${source.commit.slice(0, 12)} from ${source.url} (in ${dir})`);
  return dir;
}

/** The snapshot of the code (the default pipeline's `python/` unless `source` names another) a run at this moment would take. */
export async function codeSnapshot(
  repoOrSource: string | CodeSource,
  opts: { allowDirty: boolean },
): Promise<CodeSnapshot> {
  const { repo, path } =
    typeof repoOrSource === 'string' ? { repo: repoOrSource, path: CODE_PATH } : repoOrSource;
  const commit = (await git(repo, ['rev-parse', 'HEAD'])).trim();
  const status = await git(repo, ['status', '--porcelain', '--untracked-files=all', '--', path]);
  const changed = status
    .split('\n')
    .filter(Boolean)
    .map((l) => l.slice(3));
  const treeOf = (root: string) => `${root}:${path === '.' ? '' : path}`;
  if (changed.length === 0) {
    return { tree: (await git(repo, ['rev-parse', treeOf('HEAD')])).trim(), commit, dirty: false };
  }
  if (!opts.allowDirty) throw new DirtyTreeError(changed, path);
  // The working tree as a commit would take it, through an index of its own (the user's is untouched).
  const dir = mkdtempSync(join(tmpdir(), 'hpc-index-'));
  try {
    const env = { GIT_INDEX_FILE: join(dir, 'index') };
    await git(repo, ['read-tree', 'HEAD'], env);
    await git(repo, ['add', '-A', '--', path], env);
    const root = (await git(repo, ['write-tree'], env)).trim();
    const tree = (await git(repo, ['rev-parse', treeOf(root)])).trim();
    const diff = await git(repo, ['diff', '--cached', '--binary', 'HEAD', '--', path], env);
    return { tree, commit, dirty: true, diff };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The snapshot's directory under the site's code root. */
export function snapshotDir(codeRoot: string, snapshot: Pick<CodeSnapshot, 'tree'>): string {
  return `${codeRoot.replace(/\/+$/, '')}/${snapshot.tree}`;
}

/** The link in the code root to the snapshot of the latest run shipped (a kernel's default code). */
export function currentSnapshotLink(codeRoot: string): string {
  return `${codeRoot.replace(/\/+$/, '')}/${CURRENT_CODE_LINK}`;
}

/**
 * Puts the snapshot on the site unless it is there already (same content, same name), then points
 * the code root's `current` link at it; returns whether it was uploaded now.
 */
export async function uploadSnapshot(
  repo: string,
  snapshot: CodeSnapshot,
  files: SiteFiles,
  codeRoot: string,
): Promise<boolean> {
  const dest = snapshotDir(codeRoot, snapshot);
  const uploaded = (await files.exists(dest)) ? false : await putSnapshot(repo, snapshot, files, dest);
  // Relative, so the link stays right wherever the scratch filesystem is mounted.
  await files.pointLink(currentSnapshotLink(codeRoot), snapshot.tree);
  return uploaded;
}

async function putSnapshot(
  repo: string,
  snapshot: CodeSnapshot,
  files: SiteFiles,
  dest: string,
): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), 'hpc-code-'));
  try {
    const tar = await runCommand(
      'sh',
      ['-c', 'git archive --format=tar "$1" | tar -x -C "$2"', 'sh', snapshot.tree, dir],
      {
        cwd: repo,
      },
    );
    if (tar.code !== 0) throw new Error(`exporting code tree ${snapshot.tree} failed: ${tar.stderr.trim()}`);
    return await files.putTree(dir, dest);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
