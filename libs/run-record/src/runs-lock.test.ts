import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { acquireLock } from './runs-lock.ts';

describe('acquireLock', () => {
  it('lets one holder in at a time', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'runner-lock-')), 'runs', '.lock');
    const order: string[] = [];
    const worker = async (name: string) => {
      const lock = await acquireLock(path);
      order.push(`${name}+`);
      await new Promise((r) => setTimeout(r, 50));
      order.push(`${name}-`);
      lock.release();
    };
    await Promise.all([worker('a'), worker('b'), worker('c')]);
    for (let i = 0; i < order.length; i += 2) expect(order[i]!.slice(0, -1)).toBe(order[i + 1]!.slice(0, -1));
    expect(existsSync(path)).toBe(false);
  });

  it('breaks a lock whose holder is dead', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'runner-lock-')), '.lock');
    writeFileSync(path, '999999999\n');
    const started = Date.now();
    const lock = await acquireLock(path, 1000);
    // taken over at once, not waited out: the lock now names this process
    expect(Date.now() - started).toBeLessThan(1000);
    expect(readFileSync(path, 'utf8')).toBe(`${process.pid}\n`);
    lock.release();
    expect(existsSync(path)).toBe(false);
  });

  it('gives up on a live holder after the timeout, naming it', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'runner-lock-')), '.lock');
    writeFileSync(path, `${process.pid}\n`);
    await expect(acquireLock(path, 300)).rejects.toThrow(new RegExp(`pid ${process.pid}`));
  });
});
