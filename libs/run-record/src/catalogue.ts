// The catalogue of all runs: one Parquet file per finished stage in `<runs root>/catalogue/`, written
// by the pipeline and the job epilog (the site helpers' catalogue module; its columns are the run contract's)
// and read by the site helper `runs`. Here: where it is for a run and for a stack, and the copy of a
// site's catalogue brought back into the local runs root (the rsync that brings runs back: a mirror of
// the site's folder, which its writers keep compacted; docs/ARCHITECTURE.md "The catalogue at lab scale").
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CATALOGUE_DIR, SITE_HELPER_MODULE } from '@kdgat/config';
import { pythonOf, type StackOutputs } from '@kdgat/planning';
import { runCommand } from '@kdgat/schedulers';
import type { SiteFiles } from '@kdgat/transport';
import type { CopyState } from './site/site-copy.ts';

/** A run dir is `<runs root>/<experiment>/<utc>-<hash>`: its catalogue is `<runs root>/catalogue`. */
export function catalogueOfRun(runDir: string): string {
  return resolve(runDir, '..', '..', CATALOGUE_DIR);
}

/** The catalogue of a runs root. */
export function catalogueOfRunsRoot(runsRoot: string): string {
  return join(runsRoot, CATALOGUE_DIR);
}

/**
 * Brings the site's catalogue (`<siteRunsDir>/catalogue`) into `localDir`, one rsync: the copy holds
 * what the site's folder holds (new files come, files the site's writers merged away go; temporary
 * files and the lock left out). The writers keep the folder compacted as rows accumulate (about a
 * hundred files at 100,000 rows, a part never rewritten), so what travels is the new files, never
 * one file per row. A site without a catalogue yet leaves the copy as it is.
 */
export async function pullCatalogue(
  files: SiteFiles,
  siteRunsDir: string,
  localDir: string,
): Promise<CopyState> {
  const remote = catalogueOfRunsRoot(siteRunsDir.replace(/\/+$/, ''));
  try {
    if (await files.exists(remote)) await files.pull(remote, localDir, ['.*'], { mirror: true });
  } catch (e) {
    return { error: (e as Error).message.split('\n')[0]! };
  }
  return { pulledAt: new Date().toISOString() };
}

/** What `runs` asks of the table: the `runs` helper's own options, passed as given. */
export interface RunsQuery {
  where?: string;
  sort?: string;
  columns?: string;
  json?: boolean;
}

export interface RunsAnswer {
  /** 0, or 2 when the pipeline refused the query (the reason is in `stderr`). */
  code: number;
  stdout: string;
  stderr: string;
}

/** `python -m <helpers> runs --catalogue DIR …` with the stack's python (the one that reads a run's files here). */
export async function runsTable(
  stack: StackOutputs,
  catalogue: string,
  query: RunsQuery,
): Promise<RunsAnswer> {
  const python = pythonOf(stack);
  if (!existsSync(python))
    throw new Error(
      `no python at ${python} (the environment of the stack's outputs): run \`nx run infra:up\`, or set HPC_PYTHON`,
    );
  const args = ['-m', SITE_HELPER_MODULE, 'runs', '--catalogue', catalogue];
  if (query.where !== undefined) args.push('--where', query.where);
  if (query.sort !== undefined) args.push('--sort', query.sort);
  if (query.columns !== undefined) args.push('--columns', query.columns);
  if (query.json) args.push('--json');
  const r = await runCommand(python, args);
  if (r.code !== 0 && r.code !== 2)
    throw new Error(
      `python -m ${SITE_HELPER_MODULE} runs failed (exit ${r.code}):\n${r.stderr.trim() || r.stdout.trim()}`,
    );
  return { code: r.code, stdout: r.stdout, stderr: r.stderr };
}
