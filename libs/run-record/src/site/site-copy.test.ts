import { describe, expect, it } from 'vitest';
import type { Manifest } from '../manifest.ts';
import { connectionOf, localView } from './site-copy.ts';

const manifest = {
  runDir: '/fs/scratch/P/kd/runs/exp/r1',
  spec: { file: 'x.yaml', text: 'log: /fs/scratch/P/kd/runs/exp/r1/logs', hash: 'h' },
  resolved: { note: '/fs/scratch/P/kd/runs/exp/r1' },
  stack: { name: 's', source: 'f', outputs: { scratch: { runsDir: '/fs/scratch/P/kd/runs' } } },
  jobs: [
    {
      key: 'train',
      runRoot: '/fs/scratch/P/kd/runs/exp/r1/outputs',
      logs: {
        output: '/fs/scratch/P/kd/runs/exp/r1/logs/%x-%j.out',
        error: '/fs/scratch/P/kd/runs/exp/r1-other/x',
      },
    },
  ],
} as unknown as Manifest;

describe('the local copy of a run on a site over ssh', () => {
  it('reads every path under the site run dir from the copy, and nothing else', () => {
    const v = localView(manifest, '/home/me/.hpc/sites/s/runs/exp/r1');
    expect(v.runDir).toBe('/home/me/.hpc/sites/s/runs/exp/r1');
    expect(v.jobs[0]!.runRoot).toBe('/home/me/.hpc/sites/s/runs/exp/r1/outputs');
    expect(v.jobs[0]!.logs.output).toBe('/home/me/.hpc/sites/s/runs/exp/r1/logs/%x-%j.out');
    // a sibling run that merely shares the prefix, the runs root, and what the user wrote stay as they are
    expect(v.jobs[0]!.logs.error).toBe('/fs/scratch/P/kd/runs/exp/r1-other/x');
    expect(v.stack.outputs.scratch.runsDir).toBe('/fs/scratch/P/kd/runs');
    expect(v.spec).toBe(manifest.spec);
    expect(v.resolved).toBe(manifest.resolved);
    // the record itself is not changed
    expect(manifest.runDir).toBe('/fs/scratch/P/kd/runs/exp/r1');
  });

  it('takes manifests from before the connection output as local', () => {
    expect(connectionOf(manifest)).toEqual({ kind: 'local' });
  });
});
