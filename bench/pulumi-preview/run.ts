// Wall time of `pulumi preview --diff` on the local stack: unchanged, and with a one-package change.
// The unchanged preview is the baseline measured in the same run.
//   node bench/pulumi-preview/run.ts [--runs N]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TempStack, ok, pulumiVersion } from '../../infra/test/e2e/pulumi-harness.ts';
import { localConfig } from '../../infra/test/e2e/pulumi-local.config.ts';
import { makeWheels } from '../../infra/test/e2e/tools.ts';
import { fmt, median, runsArgument, time } from './timing.ts';

const runs = runsArgument();

const root = mkdtempSync(join(tmpdir(), 'kdgat-bench-'));
const wheels = makeWheels(join(root, 'wheels'), ['alpha==1.0', 'alpha==2.0']);
const stack = new TempStack('bench', localConfig(root, wheels, ['alpha==1.0']));
try {
  const up = time(() => ok(stack.up()));
  const unchanged: number[] = [];
  for (let i = 0; i < runs; i++) unchanged.push(time(() => ok(stack.preview())));
  stack.setConfig(localConfig(root, wheels, ['alpha==2.0']));
  const changed: number[] = [];
  for (let i = 0; i < runs; i++) changed.push(time(() => ok(stack.preview())));

  console.log(`pulumi ${pulumiVersion()}, node ${process.version}, ${runs} runs each`);
  console.log(`first up (venv + layout + 4 scripts, 10 resources): ${up.toFixed(2)} s`);
  console.log(`preview --diff, unchanged stack (baseline): ${fmt(unchanged)}`);
  console.log(`preview --diff, one package changed:        ${fmt(changed)}`);
  console.log(`ratio one-package-change / unchanged: ${(median(changed) / median(unchanged)).toFixed(2)}`);
} finally {
  stack.destroy();
}
