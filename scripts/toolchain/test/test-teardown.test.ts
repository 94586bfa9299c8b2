// `npm test` stopped by a signal mid-way removes what its suites made: scripts/test.sh runs one suite
// (HPC_TEST_SUITES) that makes a temp file under the run's TMPDIR, a box folder under /var/tmp as the
// site suites do, and a process that would outlive it; the script is signalled once they exist, and
// the machine is checked: no process, no temp folder, no box.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

const repo = resolve(import.meta.dirname, '../../..');

async function until<T>(what: string, f: () => T | undefined, ms = 180_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(250);
  }
}

const alive = (pid: number) => spawnSync('kill', ['-0', String(pid)]).status === 0;

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(`npm test stopped by ${signal} mid-way removes its temp folder, the boxes its suites made and their processes`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kdgat-teardown-'));
    try {
      const report = join(dir, 'report');
      // The suite: what a site suite leaves while it runs — a box, a temp file, a daemon-like child.
      const suite = join(dir, 'suite.sh');
      writeFileSync(
        suite,
        [
          '#!/usr/bin/env bash',
          'set -euo pipefail',
          'box=$(mktemp -d /var/tmp/kdgat-ssh-site-XXXXXX)',
          'sleep 600 &',
          'printf "%s\\n%s\\n%s\\n" "$TMPDIR" "$box" "$!" >"$1.partial"',
          'mv "$1.partial" "$1"',
          'wait',
          '',
        ].join('\n'),
        { mode: 0o755 },
      );
      const child = spawn('bash', [join(repo, 'scripts', 'test.sh')], {
        cwd: repo,
        env: {
          ...process.env,
          HPC_TEST_SUITES: `a suite that waits to be signalled|bash ${suite} ${report}`,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (d) => (output += d));
      child.stderr.on('data', (d) => (output += d));
      const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
      const [runTmp, box, sleeper] = await until('the suite to start', () =>
        existsSync(report) ? readFileSync(report, 'utf8').trim().split('\n') : undefined,
      );
      assert.match(runTmp!, /^\/tmp\/kdgat-test-run\.\w+$/, "the suite ran with the run's own TMPDIR");
      assert.ok(existsSync(runTmp!) && existsSync(box!) && alive(Number(sleeper)));
      child.kill(signal);
      const code = await Promise.race([exited, sleep(120_000, 'still running', { ref: false })]);
      assert.equal(code, 130, `test.sh exit status after ${signal}:\n${output}`);
      assert.match(output, /stopped by a signal; removing what the suites made/);
      await until("the suite's process to end", () => (alive(Number(sleeper)) ? undefined : true), 10_000);
      assert.equal(existsSync(runTmp!), false, `${runTmp} is still there`);
      assert.equal(existsSync(box!), false, `${box} is still there`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
