import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UnprovisionedSlurm } from './unprovisioned.ts';

describe('UnprovisionedSlurm', () => {
  const dir = mkdtempSync(join(tmpdir(), 'runner-unprovisioned-'));
  const scheduler = new UnprovisionedSlurm('osc-pitzer');
  const request = (script: string) => ({ name: 'j', scriptPath: script, cwd: dir, dependsOn: [] });

  it('skips sbatch --test-only, saying why, but still checks the script with bash -n', async () => {
    const good = join(dir, 'good.sh');
    writeFileSync(good, '#!/bin/bash\necho ok\n');
    const r = await scheduler.preflight(request(good));
    expect(r.ok).toBe(true);
    expect(r.message).toMatch(
      /bash -n passed; sbatch --test-only SKIPPED: stack osc-pitzer is not provisioned/,
    );
    const bad = join(dir, 'bad.sh');
    writeFileSync(bad, '#!/bin/bash\nif then\n');
    expect((await scheduler.preflight(request(bad))).ok).toBe(false);
  });

  it('cannot submit', async () => {
    await expect(scheduler.submit()).rejects.toThrow(/cannot submit: stack osc-pitzer is not provisioned/);
  });
});
