// SiteFiles through a local session: the same shell and rsync calls an ssh session sends.
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { localExecutor } from './executor.ts';
import { NotPrivateError, SiteFiles } from './site-files.ts';

function tree(root: string, files: Record<string, string>): string {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(join(root, rel, '..'), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
  return root;
}

describe('site files', () => {
  const files = new SiteFiles(localExecutor());

  it('puts a directory in place whole, and leaves an existing one untouched', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-site-'));
    const src = tree(join(root, 'src'), { 'a.sh': 'echo a\n', 'logs/.keep': '' });
    chmodSync(join(src, 'a.sh'), 0o755);
    const dest = join(root, 'site', 'runs', 'r1');
    expect(await files.putTree(src, dest)).toBe(true);
    expect(readFileSync(join(dest, 'a.sh'), 'utf8')).toBe('echo a\n');
    expect(existsSync(join(dest, 'logs'))).toBe(true);
    writeFileSync(join(src, 'a.sh'), 'changed\n');
    expect(await files.putTree(src, dest)).toBe(false);
    expect(readFileSync(join(dest, 'a.sh'), 'utf8')).toBe('echo a\n');
    // nothing half-unpacked beside it
    expect(readdirSync(join(root, 'site', 'runs'))).toEqual(['r1']);
  });

  it('a put that fails on the site says where and leaves nothing behind', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-site-'));
    const src = tree(join(root, 'src'), { 'a.sh': 'echo a\n' });
    writeFileSync(join(root, 'blocker'), 'a file where the runs directory should be');
    await expect(files.putTree(src, join(root, 'blocker', 'r2'))).rejects.toThrow(
      /putting .*src at .*blocker\/r2 on local exited with status 1/,
    );
    expect(readdirSync(root).sort()).toEqual(['blocker', 'src']);
  });

  it('replaces a file atomically, and copies a directory back without what is excluded', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-site-'));
    const site = tree(join(root, 'site'), {
      'manifest.json': '{}',
      'outputs/last.ckpt': 'big',
      'logs/j.out': 'hi',
    });
    await files.putFile(join(site, 'manifest.json'), '{"v":2}\n');
    expect(readFileSync(join(site, 'manifest.json'), 'utf8')).toBe('{"v":2}\n');
    expect(readdirSync(site).sort()).toEqual(['logs', 'manifest.json', 'outputs']);
    const copy = join(root, 'copy');
    await files.pull(site, copy, ['*.ckpt']);
    expect(readFileSync(join(copy, 'logs', 'j.out'), 'utf8')).toBe('hi');
    expect(existsSync(join(copy, 'outputs', 'last.ckpt'))).toBe(false);
    expect(await files.exists(join(site, 'logs'))).toBe(true);
    expect(await files.exists(join(site, 'nope'))).toBe(false);
  });

  it('copies a directory back as a mirror: what the site removed goes from the copy, what is excluded stays', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-site-'));
    const site = tree(join(root, 'site'), { 'a.parquet': 'a', 'b.parquet': 'b' });
    const copy = join(root, 'copy');
    await files.pull(site, copy, ['.*'], { mirror: true });
    writeFileSync(join(copy, '.lock'), "the copy's own");
    rmSync(join(site, 'a.parquet'));
    writeFileSync(join(site, 'c.parquet'), 'c');
    await files.pull(site, copy, ['.*'], { mirror: true });
    expect(readdirSync(copy).sort()).toEqual(['.lock', 'b.parquet', 'c.parquet']);
    // Without mirror: nothing local is deleted.
    rmSync(join(site, 'b.parquet'));
    await files.pull(site, copy, ['.*']);
    expect(readdirSync(copy).sort()).toEqual(['.lock', 'b.parquet', 'c.parquet']);
  });
});

describe("a directory that must be the login user's alone (the code root a neighbour must not plant)", () => {
  const files = new SiteFiles(localExecutor());
  const root = () => mkdtempSync(join(tmpdir(), 'kdgat-private-'));

  it('is made with mode 700 when missing, and accepted again as it is', async () => {
    const dir = join(root(), 'code', 'me');
    await files.ensurePrivateDir(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    await files.ensurePrivateDir(dir);
    rmSync(join(dir, '..', '..'), { recursive: true });
  });

  it("refuses one that is someone else's, writable by the group, or a link, saying why and what to do", async () => {
    const r = root();
    const theirs = join(r, 'theirs');
    mkdirSync(theirs, { mode: 0o700 });
    chownSync(theirs, 65534, 65534); // the neighbour made it first
    await expect(files.ensurePrivateDir(theirs)).rejects.toThrow(NotPrivateError);
    await expect(files.ensurePrivateDir(theirs)).rejects.toThrow(
      /theirs belongs to \S+ \(uid 65534\), not to \S+: what the runner puts in .*theirs runs as you, so it must be yours alone \(mode 700\); nothing was queued\. Remove it/,
    );
    const open = join(r, 'open');
    mkdirSync(open);
    chmodSync(open, 0o770);
    await expect(files.ensurePrivateDir(open)).rejects.toThrow(/open is writable by others \(mode 770\)/);
    symlinkSync(theirs, join(r, 'link'));
    await expect(files.ensurePrivateDir(join(r, 'link'))).rejects.toThrow(
      /link is not a directory \(a link or a file is there\)/,
    );
    rmSync(r, { recursive: true });
  });

  it('re-points a link without a temporary name anyone could have planted', async () => {
    const r = root();
    const victim = join(r, 'victim.txt');
    writeFileSync(victim, 'keep');
    // The old fixed temporary name, planted as a link to a file of the victim's.
    symlinkSync(victim, join(r, `current.hpc-tmp.${process.pid}`));
    await files.pointLink(join(r, 'current'), 'tree1');
    expect(readlinkSync(join(r, 'current'))).toBe('tree1');
    expect(readFileSync(victim, 'utf8')).toBe('keep');
    expect(
      readdirSync(r).filter((n) => n.startsWith('current.hpc-tmp.') && !n.endsWith(String(process.pid))),
    ).toEqual([]);
    rmSync(r, { recursive: true });
  });
});
