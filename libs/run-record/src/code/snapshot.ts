// The pipeline's code as a run takes it to a site: the tracked tree of `python/`, named by its git
// tree hash (content-addressed: the same code is uploaded once and reused by later runs). A working
// tree with changes under python/ is refused unless the user allows it; then the snapshot is the
// working tree as git would commit it, and the diff against HEAD is kept with the run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CURRENT_CODE_LINK } from '@kdgat/config';
import { runCommand } from '@kdgat/schedulers';
import type { SiteFiles } from '@kdgat/transport';

/** The directory of the repository that travels. */
export const CODE_PATH = 'python';
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
  constructor(changed: string[]) {
    super(
      `the working tree has changes under ${CODE_PATH}/ that no commit holds (${changed.slice(0, 5).join(', ')}` +
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

/** The snapshot of `python/` that a run at this moment would take. */
export async function codeSnapshot(repo: string, opts: { allowDirty: boolean }): Promise<CodeSnapshot> {
  const commit = (await git(repo, ['rev-parse', 'HEAD'])).trim();
  const status = await git(repo, ['status', '--porcelain', '--untracked-files=all', '--', CODE_PATH]);
  const changed = status
    .split('\n')
    .filter(Boolean)
    .map((l) => l.slice(3));
  if (changed.length === 0) {
    return { tree: (await git(repo, ['rev-parse', `HEAD:${CODE_PATH}`])).trim(), commit, dirty: false };
  }
  if (!opts.allowDirty) throw new DirtyTreeError(changed);
  // The working tree as a commit would take it, through an index of its own (the user's is untouched).
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-index-'));
  try {
    const env = { GIT_INDEX_FILE: join(dir, 'index') };
    await git(repo, ['read-tree', 'HEAD'], env);
    await git(repo, ['add', '-A', '--', CODE_PATH], env);
    const root = (await git(repo, ['write-tree'], env)).trim();
    const tree = (await git(repo, ['rev-parse', `${root}:${CODE_PATH}`])).trim();
    const diff = await git(repo, ['diff', '--cached', '--binary', 'HEAD', '--', CODE_PATH], env);
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
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-code-'));
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
