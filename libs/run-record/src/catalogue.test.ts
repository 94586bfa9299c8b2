// The catalogue as the runner reaches it: where it is for a run, and a site's copied back with the
// rsync that brings runs back (through a local session here: the same calls as over SSH).
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SiteFiles, localExecutor } from '@kdgat/transport';
import { describe, expect, it } from 'vitest';
import { catalogueOfRun, catalogueOfRunsRoot, pullCatalogue } from './catalogue.ts';

describe('the catalogue of all runs', () => {
  it("is the runs root's `catalogue` folder, two levels above a run dir", () => {
    expect(catalogueOfRun('/fs/scratch/P/kd-gat/runs/exp/20261125T120000Z-abcdef12')).toBe(
      '/fs/scratch/P/kd-gat/runs/catalogue',
    );
    expect(catalogueOfRunsRoot('/s/runs')).toBe('/s/runs/catalogue');
  });

  it('comes back from the site without temporary files, adding to the local copy; none on the site is no error', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-catalogue-'));
    const siteRuns = join(root, 'site', 'runs');
    const local = join(root, 'laptop', 'runs', 'catalogue');
    const files = new SiteFiles(localExecutor());

    expect(await pullCatalogue(files, siteRuns, local)).toMatchObject({ pulledAt: expect.any(String) });
    mkdirSync(join(siteRuns, 'catalogue'), { recursive: true });
    writeFileSync(join(siteRuns, 'catalogue', 'ae-point0-1111.parquet'), 'row 1');
    writeFileSync(join(siteRuns, 'catalogue', '.ae-point1-2222.parquet.77.ab.tmp'), 'half a row');
    mkdirSync(local, { recursive: true });
    writeFileSync(join(local, 'ae-point2-3333.parquet'), 'a row compacted away on the site since');
    const state = await pullCatalogue(files, `${siteRuns}/`, local);
    expect(state.error).toBeUndefined();
    expect(readdirSync(local).sort()).toEqual(['ae-point0-1111.parquet', 'ae-point2-3333.parquet']);
  });
});
