// Every partition of the OSC presets against OSC's published node figures, so a mistyped or copied
// preset value fails here rather than in a bill.
import { describe, expect, it } from 'vitest';
import { clusterPresets } from './presets.ts';
import type { Partition } from './schema.ts';

/**
 * OSC's published figures per partition, as gathered (with their sources) in shared/docs/DOMAIN.md,
 * "OSC": cores per node, usable memory per node and GPUs per node from the clusters' technical
 * specifications (osc.edu, https://www.osc.edu/resources/technical_support/supercomputers); memory
 * billed as one core = usable memory / cores per node (osc.edu, Pitzer "Batch Limit Rules" and "Job
 * and storage charging"); walltime limits from the same pages (7 days on GPU partitions unless said).
 */
const SOURCE = 'osc.edu technical specifications and Pitzer "Batch Limit Rules", via shared/docs/DOMAIN.md';
const PUBLISHED: Record<
  string,
  { cores: number; memGB: number; gpus: number; gpuType?: string; gpuMemGB?: number; maxWalltime: string }
> = {
  // Pitzer's regular 40-core Skylake nodes: 177.96 GB usable, 4.449 GB per core (osc.edu, Pitzer
  // "Batch Limit Rules", its memory table; not in DOMAIN.md); serial jobs up to 168 h (DOMAIN.md).
  'osc-pitzer/cpu': { cores: 40, memGB: 177.96, gpus: 0, maxWalltime: '7-00:00:00' },
  'osc-pitzer/gpu': {
    cores: 40,
    memGB: 363,
    gpus: 2,
    gpuType: 'v100',
    gpuMemGB: 16,
    maxWalltime: '7-00:00:00',
  },
  'osc-pitzer/gpu-exp': {
    cores: 48,
    memGB: 363,
    gpus: 2,
    gpuType: 'v100',
    gpuMemGB: 32,
    maxWalltime: '7-00:00:00',
  },
  'osc-pitzer/gpu-quad': {
    cores: 48,
    memGB: 744,
    gpus: 4,
    gpuType: 'v100',
    gpuMemGB: 32,
    maxWalltime: '7-00:00:00',
  },
  'osc-ascend/nextgen': { cores: 128, memGB: 503, gpus: 2, gpuType: 'a100', maxWalltime: '7-00:00:00' },
  'osc-ascend/quad': { cores: 96, memGB: 1005, gpus: 4, gpuType: 'a100', maxWalltime: '7-00:00:00' },
  'osc-cardinal/gpu': { cores: 104, memGB: 936, gpus: 4, gpuType: 'h100', maxWalltime: '7-00:00:00' },
};

/**
 * Partitions whose node figures DOMAIN.md does not give: only their walltime limit (Pitzer gpudebug
 * 1 h, gpubackfill 4 h; Ascend longgpu 14 days). The presets give them the nodes of gpu / nextgen;
 * the test checks the limit, and that memory per core is the partition's own memory / cores.
 */
const LIMIT_ONLY: Record<string, { maxWalltime: string }> = {
  'osc-pitzer/gpudebug': { maxWalltime: '01:00:00' },
  'osc-pitzer/gpubackfill': { maxWalltime: '04:00:00' },
  'osc-ascend/longgpu': { maxWalltime: '14-00:00:00' },
};

const OSC_PRESETS = ['osc-pitzer', 'osc-ascend', 'osc-cardinal'] as const;
const partitions: [string, Partition][] = OSC_PRESETS.flatMap((preset) =>
  clusterPresets[preset].partitions.map((p): [string, Partition] => [`${preset}/${p.name}`, p]),
);

/** What the site bills one core's worth of memory at: the partition's figure, else memory / cores. */
const memPerCore = (p: Partition) => p.memPerCoreGB ?? p.memPerNodeGB / p.coresPerNode;

describe(`OSC presets against the published node figures (${SOURCE})`, () => {
  it('every partition of every OSC preset is in the published table or has only a published limit', () => {
    const unlisted = partitions
      .map(([key]) => key)
      .filter((key) => !(key in PUBLISHED) && !(key in LIMIT_ONLY));
    expect(unlisted).toEqual([]);
  });

  it.each(partitions.filter(([key]) => key in PUBLISHED))(
    '%s: cores, memory, GPUs, memory per core and walltime limit',
    (key, p) => {
      const published = PUBLISHED[key]!;
      expect({
        coresPerNode: p.coresPerNode,
        memPerNodeGB: p.memPerNodeGB,
        gpusPerNode: p.gpusPerNode,
        gpuType: p.gpuType,
        maxWalltime: p.maxWalltime,
      }).toEqual({
        coresPerNode: published.cores,
        memPerNodeGB: published.memGB,
        gpusPerNode: published.gpus,
        gpuType: published.gpuType,
        maxWalltime: published.maxWalltime,
      });
      if (published.gpuMemGB !== undefined) expect(p.gpuMemGB).toBe(published.gpuMemGB);
      // usable memory / cores per node, to 0.005 GB (Pitzer gpu's 9.074 is 363 / 40 = 9.075 as OSC rounds it)
      expect(memPerCore(p)).toBeCloseTo(published.memGB / published.cores, 2);
    },
  );

  it.each(partitions.filter(([key]) => key in LIMIT_ONLY))('%s: the published walltime limit', (key, p) => {
    expect(p.maxWalltime).toBe(LIMIT_ONLY[key]!.maxWalltime);
    expect(memPerCore(p)).toBeCloseTo(p.memPerNodeGB / p.coresPerNode, 2);
  });
});
