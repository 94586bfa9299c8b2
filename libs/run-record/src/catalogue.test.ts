// The catalogue as the runner reaches it: where it is for a run, and a site's copied back with the
// rsync that brings runs back (through a local session here: the same calls as over SSH).
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
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

  it('comes back from the site as the site holds it: new rows come, rows the site merged into a part go, temporary files stay behind; none on the site is no error', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-catalogue-'));
    const siteRuns = join(root, 'site', 'runs');
    const site = join(siteRuns, 'catalogue');
    const local = join(root, 'laptop', 'runs', 'catalogue');
    const files = new SiteFiles(localExecutor());

    expect(await pullCatalogue(files, siteRuns, local)).toMatchObject({ pulledAt: expect.any(String) });
    mkdirSync(site, { recursive: true });
    writeFileSync(join(site, 'ae-point0-1111.parquet'), 'row 1');
    writeFileSync(join(site, 'ae-point1-2222.parquet'), 'row 2');
    writeFileSync(join(site, '.ae-point3-4444.parquet.77.ab.tmp'), 'half a row');
    writeFileSync(join(site, '.compact.lock'), '');
    expect((await pullCatalogue(files, `${siteRuns}/`, local)).error).toBeUndefined();
    expect(readdirSync(local).sort()).toEqual(['ae-point0-1111.parquet', 'ae-point1-2222.parquet']);

    // A writer on the site merged the two rows into a part; a third row came since.
    rmSync(join(site, 'ae-point0-1111.parquet'));
    rmSync(join(site, 'ae-point1-2222.parquet'));
    writeFileSync(join(site, 'part-20261125T120000-abcd0123.parquet'), 'rows 1 and 2');
    writeFileSync(join(site, 'ae-point2-3333.parquet'), 'row 3');
    expect((await pullCatalogue(files, siteRuns, local)).error).toBeUndefined();
    expect(readdirSync(local).sort()).toEqual([
      'ae-point2-3333.parquet',
      'part-20261125T120000-abcd0123.parquet',
    ]);
    expect(readFileSync(join(local, 'part-20261125T120000-abcd0123.parquet'), 'utf8')).toBe('rows 1 and 2');

    // The site's folder gone (a purge of its runs root): the copy is kept as it was.
    rmSync(site, { recursive: true });
    expect((await pullCatalogue(files, siteRuns, local)).error).toBeUndefined();
    expect(readdirSync(local)).toHaveLength(2);
  });
});
