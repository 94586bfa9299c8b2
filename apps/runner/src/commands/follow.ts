// `--wait`: follow a submitted run to the end (states recorded as they are seen), then the
// summary table, the verdict and where the report is; exit 1 when any task did not complete.
import { isFailure } from '@kdgat/schedulers';
import {
  formatTable,
  schedulerForManifest,
  summaryRows,
  verdictLines,
  watchRun,
  type RunRecord,
} from '@kdgat/run-record';
import type { Io } from '../cli/args.ts';

export async function follow(record: RunRecord, io: Io): Promise<number> {
  const progress = await watchRun({
    scheduler: schedulerForManifest(record.manifest),
    manifest: record.manifest,
    out: io.out,
    onPoll: (p) => record.seen(p),
  });
  const rows = summaryRows(record.manifest, progress);
  io.out.write(`\n${formatTable(rows)}\n`);
  const failed = rows.filter((r) => isFailure(r.state));
  io.out.write(
    failed.length > 0
      ? `\n${failed.length} task(s) did not complete.\n`
      : `\nall ${rows.length} task(s) completed; manifest: ${record.path}\n`,
  );
  const verdict = verdictLines(record.manifest);
  if (verdict.length > 0) io.out.write(`\n${verdict.join('\n')}\n`);
  io.out.write(`report: nx run runner:report ${record.manifest.runDir}\n`);
  return failed.length > 0 ? 1 : 0;
}
