// Wall time of `pulumi up` and `pulumi preview --diff` on a `local` stack of three environments
// against the same stack with one (the baseline, measured in the same run), interleaved A B A B.
//   bash scripts/with-toolchain.sh node bench/pulumi-preview/environments.ts [--runs N]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TempStack, ok, pulumiVersion } from '../../infra/test/e2e/pulumi-harness.ts';
import { localConfig, type ExtraEnvironment } from '../../infra/test/e2e/pulumi-local.config.ts';
import { makeWheels } from '../../infra/test/e2e/tools.ts';
import { fmt, median, runsArgument, time } from './timing.ts';

const runs = runsArgument();

const root = mkdtempSync(join(tmpdir(), 'kdgat-bench-envs-'));
const wheels = makeWheels(join(root, 'wheels'), ['alpha==1.0', 'beta==0.1', 'gamma==3.0']);
const extra: ExtraEnvironment[] = [
  { name: 'cpu-e2e-b', pip: ['beta==0.1'], kernel: { displayName: 'bench b' } },
  { name: 'cpu-e2e-c', pip: ['gamma==3.0'] },
];
const one = new TempStack('bench-one', localConfig(join(root, 'one'), wheels, ['alpha==1.0'], ['hcrl_sa']));
const three = new TempStack(
  'bench-three',
  localConfig(join(root, 'three'), wheels, ['alpha==1.0'], ['hcrl_sa'], extra),
);
const ups = { one: [] as number[], three: [] as number[] };
const previews = { one: [] as number[], three: [] as number[] };
try {
  for (let i = 0; i < runs; i++) {
    // A then B: a fresh up of each (destroyed after), then an unchanged preview of each.
    for (const [key, stack] of [
      ['one', one],
      ['three', three],
    ] as const) {
      ups[key].push(time(() => ok(stack.up())));
      previews[key].push(time(() => ok(stack.preview())));
      ok(stack.destroy());
    }
    process.stdout.write(`run ${i + 1}/${runs} done\n`);
  }
  console.log(`pulumi ${pulumiVersion()}, node ${process.version}, ${runs} runs each, interleaved one/three`);
  console.log(`up, one environment (baseline):         ${fmt(ups.one)}`);
  console.log(`up, three environments (+1 kernel):     ${fmt(ups.three)}`);
  console.log(`preview --diff, one (baseline):         ${fmt(previews.one)}`);
  console.log(`preview --diff, three:                  ${fmt(previews.three)}`);
  console.log(
    `ratio three/one: up ${(median(ups.three) / median(ups.one)).toFixed(2)}, preview ${(median(previews.three) / median(previews.one)).toFixed(2)}`,
  );
} finally {
  one.destroy();
  three.destroy();
}
