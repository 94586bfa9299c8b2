// `--from-manifest` compares the re-rendered scripts with the recorded ones, byte for byte, and
// says why they differ when the recorded run's scripts were rendered by the older layout (the job
// shell inline in every script) or load another version of the job library.
import { describe, expect, it } from 'vitest';
import type { RenderedJob } from '@kdgat/planning';
import type { Manifest } from './manifest.ts';
import { reproductionOf, scriptHashes } from './record.ts';

const library = {
  path: '/s/scripts/lib/job-0123456789abcdef.sh',
  sha256: '01'.repeat(32),
  source: 'site' as const,
};
const job = (script: string): RenderedJob => ({
  job: {
    key: 'train',
    stageId: 'train',
    name: 'kdgat-x-train',
    scriptFile: 'scripts/train.sh',
    dependsOn: [],
  },
  script,
  runRoot: '/r/outputs',
  logs: { output: '/r/logs/%x-%j.out', error: '/r/logs/%x-%j.err' },
  hints: { cpusPerTask: 1, timeLimit: '1:00:00' },
  library,
});
const now = [job('#!/bin/bash\nhpc_profile=local\nsource "$hpc_job_library"\n')];
const recorded = (scripts: Record<string, string>, jobLibrary?: Manifest['jobLibrary']) =>
  ({ runDir: '/r', scripts, ...(jobLibrary ? { jobLibrary } : {}) }) as unknown as Manifest;

describe('reproductionOf', () => {
  it('is identical for a run recorded with this layout and library', () => {
    expect(reproductionOf(recorded(scriptHashes(now), library), now)).toEqual({
      identical: true,
      differing: [],
    });
  });

  it('says a run recorded by the older layout had the job shell inline, and why the bytes differ', () => {
    const inline = [
      job(
        '#!/bin/bash\nhpc_profile=local\n# ---- @kdgat/slurm-templates src/shell/job-start.sh ----\nset -euo pipefail\n',
      ),
    ];
    const r = reproductionOf(recorded(scriptHashes(inline)), now);
    expect(r.identical).toBe(false);
    expect(r.differing).toEqual(['scripts/train.sh']);
    expect(r.note).toBe(
      "the recorded run's scripts were rendered by the older layout, each carrying the whole job shell inline; " +
        'the scripts rendered now hold only their #SBATCH lines and values and load the job library ' +
        '/s/scripts/lib/job-0123456789abcdef.sh (sha256 010101010101), so their bytes differ (the new run uses the scripts rendered now)',
    );
  });

  it('names the other version of the job library a recorded run loaded', () => {
    const older = { ...library, sha256: 'ff'.repeat(32), path: '/s/scripts/lib/job-ffffffffffffffff.sh' };
    const r = reproductionOf(recorded({ 'scripts/train.sh': '0'.repeat(64) }, older), now);
    expect(r.note).toContain(
      'load another version of the job library (sha256 ffffffffffff, /s/scripts/lib/job-ffffffffffffffff.sh)',
    );
  });

  it('gives no note when the same library renders other bytes (the spec or the stack changed)', () => {
    const r = reproductionOf(recorded({ 'scripts/train.sh': '0'.repeat(64) }, library), now);
    expect(r).toEqual({ identical: false, differing: ['scripts/train.sh'] });
  });
});
