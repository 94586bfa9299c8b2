// A lock file in the runs root so two `train` calls with the same spec submit once.
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { pidAlive } from '@kdgat/schedulers';

export interface HeldLock {
  release(): void;
}

/** Takes `path` with O_EXCL; waits for a live holder, breaks a dead holder's lock. */
export async function acquireLock(path: string, timeoutMs = 120_000): Promise<HeldLock> {
  mkdirSync(dirname(path), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return { release: () => rmSync(path, { force: true }) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let holder: number | undefined;
    try {
      holder = Number(readFileSync(path, 'utf8').trim()) || undefined;
    } catch {
      continue; // released between our open and read
    }
    if (holder !== undefined && !pidAlive(holder)) {
      rmSync(path, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `another kdgat-runner (pid ${holder ?? '?'}) holds ${path}; waited ${timeoutMs / 1000} s`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
