import { describe, expect, it } from 'vitest';
import { expandLogPattern, parseSbatchDirectives } from './directives.ts';

describe('parseSbatchDirectives', () => {
  it('reads long and short forms up to the first command, as sbatch does', () => {
    const script = [
      '#!/bin/bash',
      '#SBATCH --job-name=x-train',
      '#SBATCH -c 4',
      "#SBATCH --output='/runs/x/logs/%x-%j.out'",
      '#SBATCH --time=01:30:00 # comment',
      '# a plain comment',
      'set -euo pipefail',
      '#SBATCH --mem=99G',
    ].join('\n');
    const d = parseSbatchDirectives(script);
    expect(d.get('job-name')).toBe('x-train');
    expect(d.get('cpus-per-task')).toBe('4');
    expect(d.get('output')).toBe('/runs/x/logs/%x-%j.out');
    expect(d.get('time')).toBe('01:30:00');
    expect(d.has('mem')).toBe(false);
  });
});

describe('expandLogPattern', () => {
  it('expands SLURM filename patterns for an array task', () => {
    const ids = { jobId: '17', arrayJobId: '12', arrayIndex: 4, name: 'sw-train', user: 'u', node: 'n1' };
    expect(expandLogPattern('logs/%x-%A_%a.%j.%u.%N.%%', ids)).toBe('logs/sw-train-12_4.17.u.n1.%');
  });
});
