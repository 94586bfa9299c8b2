import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SiteFiles, localExecutor } from '@kdgat/transport';
import {
  DirtyTreeError,
  codeSnapshot,
  codeSourceOf,
  currentSnapshotLink,
  materializeGitCode,
  snapshotDir,
  uploadSnapshot,
} from './snapshot.ts';

function repo(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-repo-'));
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, encoding: 'utf8' });
  git('init', '-q');
  git('config', 'user.email', 't@example.org');
  git('config', 'user.name', 't');
  mkdirSync(join(dir, 'python', 'src', 'kdgat'), { recursive: true });
  writeFileSync(join(dir, 'python', 'src', 'kdgat', '__init__.py'), 'VERSION = 1\n');
  writeFileSync(join(dir, 'README.md'), 'outside python/\n');
  git('add', '-A');
  git('commit', '-q', '-m', 'one');
  return dir;
}

const git = (dir: string, ...args: string[]) =>
  execFileSync('git', args, { cwd: dir, encoding: 'utf8' }).trim();

describe('code snapshot', () => {
  it("is python/'s git tree at HEAD, whatever changes outside python/", async () => {
    const dir = repo();
    writeFileSync(join(dir, 'README.md'), 'edited, not shipped\n');
    const s = await codeSnapshot(dir, { allowDirty: false });
    expect(s).toEqual({
      tree: git(dir, 'rev-parse', 'HEAD:python'),
      commit: git(dir, 'rev-parse', 'HEAD'),
      dirty: false,
    });
  });

  it('refuses uncommitted changes under python/ and names them, unless allowed', async () => {
    const dir = repo();
    writeFileSync(join(dir, 'python', 'src', 'kdgat', '__init__.py'), 'VERSION = 2\n');
    writeFileSync(join(dir, 'python', 'src', 'kdgat', 'new.py'), 'X = 1\n');
    const err = await codeSnapshot(dir, { allowDirty: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DirtyTreeError);
    expect((err as Error).message).toMatch(/python\/src\/kdgat\/__init__\.py, python\/src\/kdgat\/new\.py/);
    expect((err as Error).message).toMatch(/--allow-dirty/);

    const s = await codeSnapshot(dir, { allowDirty: true });
    expect(s.dirty).toBe(true);
    expect(s.tree).not.toBe(git(dir, 'rev-parse', 'HEAD:python'));
    expect(s.diff).toMatch(/-VERSION = 1\n\+VERSION = 2/);
    expect(s.diff).toMatch(/new file mode .*\n[\s\S]*\+X = 1/);
    // The user's own index is untouched: nothing was staged for them.
    expect(git(dir, 'diff', '--cached', '--name-only')).toBe('');
    // The same working tree gives the same name (content-addressed).
    expect((await codeSnapshot(dir, { allowDirty: true })).tree).toBe(s.tree);
  });

  it('is uploaded once per content and holds exactly the snapshot', async () => {
    const dir = repo();
    const site = mkdtempSync(join(tmpdir(), 'kdgat-site-code-'));
    const files = new SiteFiles(localExecutor());
    writeFileSync(join(dir, 'python', 'src', 'kdgat', '__init__.py'), 'VERSION = 3\n');
    const s = await codeSnapshot(dir, { allowDirty: true });
    expect(await uploadSnapshot(dir, s, files, site)).toBe(true);
    expect(await uploadSnapshot(dir, s, files, site)).toBe(false);
    const at = snapshotDir(site, s);
    expect(readFileSync(join(at, 'src', 'kdgat', '__init__.py'), 'utf8')).toBe('VERSION = 3\n');
    expect(existsSync(join(at, 'README.md'))).toBe(false);
  });

  it("re-points the code root's current link at each snapshot shipped, uploaded now or already there", async () => {
    const dir = repo();
    const site = mkdtempSync(join(tmpdir(), 'kdgat-site-code-'));
    const files = new SiteFiles(localExecutor());
    const current = currentSnapshotLink(site);
    expect(current).toBe(`${site}/current`);
    const version = () => readFileSync(join(current, 'src', 'kdgat', '__init__.py'), 'utf8');

    const one = await codeSnapshot(dir, { allowDirty: false });
    await uploadSnapshot(dir, one, files, site);
    // relative: the link holds wherever the scratch filesystem is mounted
    expect(readlinkSync(current)).toBe(one.tree);
    expect(version()).toBe('VERSION = 1\n');

    writeFileSync(join(dir, 'python', 'src', 'kdgat', '__init__.py'), 'VERSION = 2\n');
    const two = await codeSnapshot(dir, { allowDirty: true });
    expect(await uploadSnapshot(dir, two, files, site)).toBe(true);
    expect(readlinkSync(current)).toBe(two.tree);
    expect(version()).toBe('VERSION = 2\n');

    // shipping the first again (a rerun of older code) uploads nothing and points back at it
    expect(await uploadSnapshot(dir, one, files, site)).toBe(false);
    expect(readlinkSync(current)).toBe(one.tree);
    expect(version()).toBe('VERSION = 1\n');
    // the link was renamed into place: no temporary name is left beside it
    expect(readdirSync(site).sort()).toEqual(['current', one.tree, two.tree].sort());
  });
});

describe("a declared pipeline's code", () => {
  /** A researcher's own repository: two commits, the code in src/. */
  function theirRepo(): { dir: string; first: string; second: string } {
    const dir = mkdtempSync(join(tmpdir(), 'kdgat-their-'));
    git(dir, 'init', '-q');
    git(dir, 'config', 'user.email', 't@example.org');
    git(dir, 'config', 'user.name', 't');
    mkdirSync(join(dir, 'src', 'theirs'), { recursive: true });
    writeFileSync(join(dir, 'src', 'theirs', '__init__.py'), 'VERSION = 1\n');
    git(dir, 'add', '-A');
    git(dir, 'commit', '-q', '-m', 'one');
    const first = git(dir, 'rev-parse', 'HEAD');
    writeFileSync(join(dir, 'src', 'theirs', '__init__.py'), 'VERSION = 2\n');
    git(dir, 'commit', '-qam', 'two');
    return { dir, first, second: git(dir, 'rev-parse', 'HEAD') };
  }

  it('from a git repository at a commit: cloned once at exactly that commit, then reused; its snapshot is that tree', async () => {
    const { dir, first } = theirRepo();
    const root = mkdtempSync(join(tmpdir(), 'kdgat-runner-'));
    const lines: string[] = [];
    const code = await materializeGitCode(root, 'theirs', { url: dir, commit: first }, (l) => lines.push(l));
    expect(code).toBe(join(root, '.hpc', 'pipelines', 'theirs', first));
    expect(readFileSync(join(code, 'src', 'theirs', '__init__.py'), 'utf8')).toBe('VERSION = 1\n');
    expect(lines).toEqual([`code: pipeline theirs at ${first.slice(0, 12)} from ${dir} (in ${code})`]);
    expect(await materializeGitCode(root, 'theirs', { url: dir, commit: first }, (l) => lines.push(l))).toBe(
      code,
    );
    expect(lines).toHaveLength(1); // reused, not cloned again
    const snapshot = await codeSnapshot(await codeSourceOf(root, code), { allowDirty: false });
    expect(snapshot).toMatchObject({
      tree: git(dir, 'rev-parse', `${first}^{tree}`),
      commit: first,
      dirty: false,
    });
  });

  it('refuses a commit the repository does not have, and a repository that is not there, leaving nothing behind', async () => {
    const { dir } = theirRepo();
    const root = mkdtempSync(join(tmpdir(), 'kdgat-runner-'));
    const missing = 'f'.repeat(40);
    await expect(materializeGitCode(root, 'theirs', { url: dir, commit: missing })).rejects.toThrow(
      `pipeline theirs: commit ${missing} is not in ${dir}`,
    );
    await expect(
      materializeGitCode(root, 'theirs', { url: join(dir, 'nowhere'), commit: missing }),
    ).rejects.toThrow(/pipeline theirs: git clone \S+nowhere failed/);
    expect(readdirSync(join(root, '.hpc', 'pipelines', 'theirs'))).toEqual([]);
  });

  it('from a directory of any git repository: its committed tree, refused when dirty', async () => {
    const { dir, second } = theirRepo();
    const source = await codeSourceOf('/unused', join(dir, 'src'));
    expect(source.path).toBe('src');
    expect((await codeSnapshot(source, { allowDirty: false })).tree).toBe(
      git(dir, 'rev-parse', `${second}:src`),
    );
    writeFileSync(join(dir, 'src', 'theirs', 'new.py'), '\n');
    await expect(codeSnapshot(source, { allowDirty: false })).rejects.toThrow(
      /changes under src\/ that no commit holds/,
    );
    await expect(codeSourceOf('/unused', tmpdir())).rejects.toThrow(/is not in a git repository/);
  });
});
