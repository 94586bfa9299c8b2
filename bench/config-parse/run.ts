// Parse + validate + resolve 1,000 experiment specs; baseline: YAML parsing alone of the same texts.
// Run: node bench/config-parse/run.ts   (or nx run config:bench)
import { parse } from 'yaml';
import { loadExperimentSpec } from '../../libs/config/src/index.ts';

const N = 1000;
const texts = Array.from({ length: N }, (_, i) => `name: bench-${i}
cluster: osc-pitzer
environment: gnn-rapids
account: PAS1266
stages:
  - id: ae
    stage: autoencoder
    model: vgae
    scale: large
    dataset: hcrl_sa
    overrides: { training.lr: ${(i + 1) / 1e5}, training.max_epochs: ${10 + (i % 50)} }
    resources: { cpus: 8, memGB: 72, gpus: { count: 1, type: v100 }, time: "8:00:00" }
  - id: cur
    stage: curriculum
    model: gat
    scale: large
    dataset: hcrl_sa
    dependsOn: [ae]
sweep:
  grid:
    training.lr: [0.001, 0.0003]
`);

function time(fn: () => void): number {
  const t0 = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

// Warm up the JIT and the pipeline-schema cache.
for (let i = 0; i < 50; i++) loadExperimentSpec({ text: texts[i]!, file: 'w.yaml' });
const yamlMs = Math.min(...[0, 1, 2].map(() => time(() => texts.forEach((t) => parse(t)))));
const fullMs = Math.min(...[0, 1, 2].map(() => time(() => texts.forEach((t) => loadExperimentSpec({ text: t, file: 'b.yaml' })))));
console.log(`specs: ${N}`);
console.log(`yaml parse only (baseline): ${yamlMs.toFixed(1)} ms total, ${((yamlMs * 1000) / N).toFixed(0)} µs/spec`);
console.log(`parse + validate + resolve: ${fullMs.toFixed(1)} ms total, ${((fullMs * 1000) / N).toFixed(0)} µs/spec`);
console.log(`ratio full/yaml: ${(fullMs / yamlMs).toFixed(2)}x`);
