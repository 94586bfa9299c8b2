import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { experimentJsonSchema } from '../experiment/json-schema.ts';
import { ClusterProfileSchema, clusterPresets, loadExperimentSpec, overrideKeys, loadPipelineSchema } from '../index.ts';

const repo = new URL('../../../../', import.meta.url).pathname;
const examples = join(repo, 'examples');

describe('checked-in schemas', () => {
  it('schema/experiment.schema.json is the zod schema (regenerate: nx run config:schema)', () => {
    const onDisk = JSON.parse(readFileSync(new URL('../../schema/experiment.schema.json', import.meta.url), 'utf8'));
    expect(onDisk).toEqual(experimentJsonSchema());
  });
  it('the pipeline schema seam reads the checked-in pipeline schema and lists its keys', () => {
    const keys = overrideKeys(loadPipelineSchema() as object);
    expect(keys).toEqual(expect.arrayContaining(['training.lr', 'training.max_epochs', 'gat.use_cugraph', 'vgae.use_cugraph', 'kd.alpha', 'data.num_workers']));
  });
});

describe('examples/', () => {
  const files = readdirSync(examples).filter((f) => f.endsWith('.yaml'));
  it('has the examples the README promises', () => {
    expect(files).toEqual(expect.arrayContaining(['quickstart.yaml', 'kdgat-pitzer.yaml', 'sweep-lr.yaml', 'profile.yaml', 'trial-batch.yaml', 'cugraph.yaml']));
  });
  it.each(files)('%s validates and references the editor schema', (f) => {
    const text = readFileSync(join(examples, f), 'utf8');
    expect(text).toMatch(/^# yaml-language-server: \$schema=\.\.\/libs\/config\/schema\/experiment\.schema\.json$/m);
    expect(() => loadExperimentSpec(join(examples, f))).not.toThrow();
  });
});

describe('cluster presets', () => {
  it('carry the OSC figures', () => {
    const pitzer = clusterPresets['osc-pitzer'];
    expect(pitzer.partitions.map((p) => [p.name, p.gpusPerNode, p.coresPerNode, p.memPerNodeGB])).toEqual(
      expect.arrayContaining([
        ['gpu', 2, 40, 363],
        ['gpu-exp', 2, 48, 363],
        ['gpu-quad', 4, 48, 744],
      ]),
    );
    expect(clusterPresets['osc-ascend'].partitions.find((p) => p.name === 'quad')).toMatchObject({ gpusPerNode: 4, coresPerNode: 96, memPerNodeGB: 1005 });
    expect(clusterPresets['osc-cardinal'].partitions[0]).toMatchObject({ gpuType: 'h100', gpusPerNode: 4, coresPerNode: 104, memPerNodeGB: 936 });
    expect(pitzer.accountRequired).toBe(true);
  });

  it('name the modules that provide conda and CUDA on OSC, and the Lmod init for shells without `module`', () => {
    for (const name of ['osc-pitzer', 'osc-ascend', 'osc-cardinal'] as const) {
      expect(clusterPresets[name].modules).toEqual({
        conda: 'miniconda3/24.1.2-py310',
        cuda: 'cuda/12.4.1',
        init: '/etc/profile.d/lmod.sh',
      });
    }
    expect(clusterPresets.local.modules).toEqual({});
  });

  it('refuse an Lmod init that is not an absolute path of plain characters, naming the field', () => {
    const bad = ClusterProfileSchema.safeParse({
      ...clusterPresets['osc-pitzer'],
      modules: { init: 'lmod.sh; rm -rf ~' },
    });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]).toMatchObject({
      path: ['modules', 'init'],
      message: 'an absolute path such as /etc/profile.d/lmod.sh',
    });
  });
});
