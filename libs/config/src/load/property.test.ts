// Property tests: valid generated specs round-trip object -> YAML -> parse -> equal; arbitrary
// (mostly invalid) documents only ever produce SpecValidationError — no crash, no partial result.
import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadExperimentSpec, SpecValidationError } from '../index.ts';

const name = fc.stringMatching(/^[a-z][a-z0-9_-]{0,12}$/);
const stage = fc.record({
  stage: fc.constantFrom('preprocess', 'autoencoder', 'curriculum', 'distillation', 'evaluation'),
  model: fc.constantFrom('gat', 'vgae'),
  scale: fc.constantFrom('large', 'small'),
  dataset: name,
  overrides: fc.record(
    {
      'training.lr': fc.double({ min: 1e-6, max: 1, noNaN: true }),
      'training.max_epochs': fc.integer({ min: 1, max: 500 }),
      'gat.conv': fc.constantFrom('gat', 'gatv2'),
    },
    { requiredKeys: [] },
  ),
  resources: fc.record(
    {
      // cpus are per task, one task per GPU: up to 2 x 20 on Pitzer's 40-core gpu nodes
      cpus: fc.integer({ min: 1, max: 20 }),
      memGB: fc.integer({ min: 1, max: 363 }),
      gpus: fc.record({ count: fc.integer({ min: 0, max: 2 }) }),
      time: fc.constantFrom('0:30:00', '8:00:00', '2-00:00:00'),
    },
    { requiredKeys: [] },
  ),
});
const spec = fc.record({
  name,
  cluster: fc.constant('osc-pitzer'),
  environment: fc.constantFrom('gnn-rapids', 'gnn-rapids-cugraphops'),
  account: fc.constant('PAS1266'),
  stages: fc
    .array(stage, { minLength: 1, maxLength: 4 })
    .map((ss) => ss.map((s, i) => ({ id: `s${i}`, ...s }))),
  sweep: fc.option(
    fc.record({
      grid: fc.record({
        'training.lr': fc.array(fc.double({ min: 1e-5, max: 0.1, noNaN: true }), {
          minLength: 1,
          maxLength: 3,
        }),
      }),
    }),
    { nil: undefined },
  ),
});

describe('properties', () => {
  it('valid specs round-trip through YAML unchanged', () => {
    fc.assert(
      fc.property(spec, (s) => {
        const clean = JSON.parse(JSON.stringify(s));
        const { spec: parsed } = loadExperimentSpec({ text: stringify(clean), file: 'gen.yaml' });
        const again = loadExperimentSpec({
          text: stringify(JSON.parse(JSON.stringify(parsed))),
          file: 'gen2.yaml',
        });
        expect(again.spec).toEqual(parsed);
        for (const [k, v] of Object.entries(clean))
          expect((parsed as Record<string, unknown>)[k]).toEqual(k === 'stages' ? expect.anything() : v);
        expect(parsed.stages.map((x) => x.id)).toEqual(clean.stages.map((x: { id: string }) => x.id));
      }),
      { numRuns: 60 },
    );
  });

  it('anything else is rejected only with SpecValidationError', () => {
    const junk = fc.oneof(
      fc.anything(),
      spec.chain((s) =>
        fc
          .record({
            path: fc.constantFrom('name', 'stages', 'account', 'sweep', 'environment', 'cluster'),
            value: fc.anything(),
          })
          .map(({ path, value }) => ({ ...s, [path]: value })),
      ),
    );
    fc.assert(
      fc.property(junk, (doc) => {
        let text: string;
        try {
          text = stringify(doc);
        } catch {
          return; // not representable as YAML at all
        }
        if (typeof text !== 'string') {
          return;
        }
        try {
          loadExperimentSpec({ text, file: 'junk.yaml' });
        } catch (e) {
          expect(e).toBeInstanceOf(SpecValidationError);
          expect((e as SpecValidationError).issues.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 150 },
    );
  });
});
