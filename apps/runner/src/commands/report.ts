// `runner report`: report.html and its plots in the run dir; the best sweep point, the verdict and the
// run's rows in the catalogue of all runs (a site's catalogue brought back first).
import { catalogueOfRun, isRemote, pullCatalogue, siteFilesOf, writeReport } from '@kdgat/run-record';
import { openRun, type Command } from './kit.ts';

export const reportCommand: Command = async (ctx) => {
  const { say } = ctx;
  const { record, view } = await openRun(ctx);
  const { manifest } = record;
  if (isRemote(manifest)) {
    const copy = await pullCatalogue(
      siteFilesOf(manifest),
      manifest.stack.outputs.scratch.runsDir,
      catalogueOfRun(view.runDir),
    );
    if (copy.error)
      ctx.io.err.write(
        `the site's catalogue could not be brought back (${copy.error}): the local copy's rows\n`,
      );
  }
  const r = await writeReport(view, say);
  say(`report: ${r.html} (${r.plots.length} plot(s), ${r.seconds.toFixed(1)} s)`);
  for (const [stage, b] of Object.entries(r.best)) {
    const point = Object.entries(b.point).map(([k, v]) => `${k}=${String(v)}`);
    say(`  best point of ${stage}: #${b.index} (${point.join(', ')}): ${b.metric} = ${b.value}`);
  }
  for (const f of r.verdicts) say(`  ${f.code}: ${f.evidence}\n    fix: ${f.fix}`);
  say(`  in the catalogue: ${r.catalogue.rows} row(s) of this run in ${r.catalogue.dir}`);
  return 0;
};
