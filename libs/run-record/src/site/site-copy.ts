// A run on a site reached over SSH: its directory is written on this machine (the local copy),
// put on the site whole before anything is queued, its manifest replaced there on every change,
// and copied back (logs, records, metrics; no checkpoints) whenever status, logs or the report need
// it. A run on a local connection is its own copy: nothing moves.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Connection } from '@kdgat/config';
import { SiteFiles, sessionFor } from '@kdgat/transport';
import type { Manifest } from '../manifest.ts';

/** The site copy's stamp in a local copy: when it was last brought back from the site. */
export const SITE_COPY_FILE = '.site-copy.json';

/**
 * What a copy back leaves out: checkpoints are large and nothing here reads them (a model.pt stays:
 * the check of a later run's inputs looks for it).
 */
export const COPY_EXCLUDES = ['*.ckpt', 'graph_cache/', '.staged/'];

/** How the run's site is reached (manifests from before the connection output were local). */
export function connectionOf(manifest: Pick<Manifest, 'stack'>): Connection {
  return manifest.stack.outputs.connection ?? { kind: 'local' };
}

export function isRemote(manifest: Pick<Manifest, 'stack'>): boolean {
  return connectionOf(manifest).kind === 'ssh';
}

/** The site's files through this process's session to the run's site. */
export function siteFilesOf(manifest: Pick<Manifest, 'stack'>): SiteFiles {
  return new SiteFiles(sessionFor(connectionOf(manifest)));
}

/**
 * The manifest as read from a copy at `dir`: every path under the site's run dir points into the
 * copy instead, so logs, metrics and records are read (and the report written) where they are.
 */
export function localView(manifest: Manifest, dir: string): Manifest {
  const from = manifest.runDir.replace(/\/+$/, '');
  if (from === dir) return manifest;
  const map = (v: unknown): unknown => {
    if (typeof v === 'string')
      return v === from ? dir : v.startsWith(`${from}/`) ? dir + v.slice(from.length) : v;
    if (Array.isArray(v)) return v.map(map);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, map(x)]));
    return v;
  };
  // The spec text and the resolved experiment are what the user wrote: left as they are.
  const { spec, resolved, ...rest } = manifest;
  return { ...(map(rest) as Omit<Manifest, 'spec' | 'resolved'>), spec, resolved };
}

export interface CopyState {
  /** When the copy was last brought back from the site (ISO time), if ever. */
  pulledAt?: string;
  /** Why this refresh could not reach the site (the copy is as old as pulledAt). */
  error?: string;
}

/** Brings the site's run dir back into the local copy at `dir`; says how fresh the copy is. */
export async function refreshCopy(manifest: Manifest, dir: string): Promise<CopyState> {
  const stamp = join(dir, SITE_COPY_FILE);
  const before = existsSync(stamp)
    ? (JSON.parse(readFileSync(stamp, 'utf8')) as { pulledAt?: string }).pulledAt
    : undefined;
  try {
    await siteFilesOf(manifest).pull(manifest.runDir, dir, [
      ...COPY_EXCLUDES,
      SITE_COPY_FILE,
      'manifest.json',
    ]);
  } catch (e) {
    return { ...(before ? { pulledAt: before } : {}), error: (e as Error).message.split('\n')[0]! };
  }
  const pulledAt = new Date().toISOString();
  writeFileSync(stamp, JSON.stringify({ pulledAt, from: manifest.runDir }) + '\n');
  return { pulledAt };
}

/** One line on the copy's freshness, for status, logs and the report. */
export function copyLine(manifest: Manifest, dir: string, state: CopyState): string {
  const connection = connectionOf(manifest);
  const where = `${connection.kind === 'ssh' ? connection.host : 'site'}:${manifest.runDir}`;
  if (!state.error) return `local copy ${dir} of ${where}, brought back ${state.pulledAt}`;
  return (
    `the site could not be reached (${state.error}): showing the local copy ${dir}` +
    (state.pulledAt ? `, as brought back ${state.pulledAt} — older than the site` : ', never brought back')
  );
}
