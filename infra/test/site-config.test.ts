import { describe, expect, it } from 'vitest';
import { deepMerge } from '../components/site-config.ts';

describe('stack config overrides', () => {
  it('merge objects key by key and replace lists and scalars', () => {
    const preset = {
      name: 'osc-pitzer',
      paths: { projectRoot: '/users/x', scratchRoot: '/fs/scratch/X' },
      modules: ['a'],
    };
    expect(
      deepMerge(preset, {
        paths: { scratchRoot: '/fs/scratch/PAS1266/kd-gat' },
        modules: ['b'],
        account: 'PAS1266',
      }),
    ).toEqual({
      name: 'osc-pitzer',
      paths: { projectRoot: '/users/x', scratchRoot: '/fs/scratch/PAS1266/kd-gat' },
      modules: ['b'],
      account: 'PAS1266',
    });
    expect(deepMerge(preset, undefined)).toBe(preset);
  });
});
