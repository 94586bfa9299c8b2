// `runner report`: report.html and its plots in the run dir; the best sweep point and the verdict.
import { writeReport } from '@kdgat/run-record';
import { openRun, type Command } from './kit.ts';

export const reportCommand: Command = async (ctx) => {
  const { say } = ctx;
  const r = await writeReport((await openRun(ctx)).view, say);
  say(`report: ${r.html} (${r.plots.length} plot(s), ${r.seconds.toFixed(1)} s)`);
  for (const [stage, b] of Object.entries(r.best)) {
    const point = Object.entries(b.point).map(([k, v]) => `${k}=${String(v)}`);
    say(`  best point of ${stage}: #${b.index} (${point.join(', ')}): ${b.metric} = ${b.value}`);
  }
  for (const f of r.verdicts) say(`  ${f.code}: ${f.evidence}\n    fix: ${f.fix}`);
  return 0;
};
