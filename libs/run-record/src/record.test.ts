// The record's writes to a site over SSH: in order, only when the manifest changed, failures surfaced.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Manifest } from './manifest.ts';
import { RunRecord } from './record.ts';

function record(): RunRecord {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-record-'));
  const manifest = {
    version: 1,
    runDir: '/fs/scratch/x/runs/e/r',
    jobs: [{ key: 'train', jobId: '7' }],
    submission: { status: 'planned' },
  } as unknown as Manifest;
  return RunRecord.create(dir, manifest);
}

describe('a record published to the site', () => {
  it('writes each changed manifest there in order, and skips one that did not change', async () => {
    const r = record();
    const sent: string[] = [];
    r.publishTo(async (text) => {
      await new Promise((res) => setTimeout(res, 5));
      sent.push((JSON.parse(text) as Manifest).submission.status);
    });
    r.refused('preflight said no');
    r.refused('preflight said no'); // the same manifest again: nothing to send
    r.submitted(new Map([['train', '8']]));
    await r.published();
    expect(sent).toEqual(['failed', 'submitted']);
    // The local manifest is the whole truth either way.
    expect(JSON.parse(readFileSync(r.path, 'utf8')).jobs[0].jobId).toBe('8');
  });

  it('reports a write that failed', async () => {
    const r = record();
    r.publishTo(() => Promise.reject(new Error('ssh to site failed (status 255)')));
    r.refused('x');
    await expect(r.published()).rejects.toThrow(/status 255/);
  });

  it('publishes nothing before publishTo (the run dir is not on the site yet)', async () => {
    const r = record();
    r.refused('x');
    await expect(r.published()).resolves.toBeUndefined();
  });
});
