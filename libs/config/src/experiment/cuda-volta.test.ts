import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { loadExperimentSpec, SpecValidationError } from '../index.ts';
import { PITZER_SPEC } from '../test-support/specs.ts';

it('a CUDA 13 environment is refused on V100 partitions, accepted on H100', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-env-'));
  writeFileSync(
    join(dir, 'cuda13.yaml'),
    'name: cuda13\nbackend: conda\nchannels: [rapidsai, conda-forge]\ncudaVersion: "13.0"\ndependencies: [python=3.12, cuda-version=13.0, cugraph=26.10, pytorch=2.9]\n',
  );
  const text = PITZER_SPEC.replace('environment: gnn-rapids', 'environment: ./cuda13.yaml');
  let err: unknown;
  try {
    loadExperimentSpec({ text, file: join(dir, 'spec.yaml') });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(SpecValidationError);
  expect((err as SpecValidationError).issues[0]!.message).toContain('CUDA 13.0, whose builds exclude v100 (Volta)');
  const cardinal = text.replace('cluster: osc-pitzer', 'cluster: osc-cardinal').replace('type: v100', 'type: h100');
  expect(loadExperimentSpec({ text: cardinal, file: join(dir, 'spec.yaml') }).resolved.partition.name).toBe('gpu');
});
