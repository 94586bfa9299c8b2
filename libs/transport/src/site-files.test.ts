// SiteFiles through a local session: the same shell and rsync calls an ssh session sends.
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { localExecutor } from './executor.ts';
import { SiteFiles } from './site-files.ts';

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
});
