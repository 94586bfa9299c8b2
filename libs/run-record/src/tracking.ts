// A run's experiment tracking as the runner reaches it: the TensorBoard event files every training
// stage writes in its run dir (`<stage dir>/tensorboard/`, by the default pipeline's tracking module), and the
// upload of what was tracked offline on compute nodes (W&B), the site helper `tracking-sync`, run
// where there is a network: the site's login node, in the stage's environment.
import { existsSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { RUN_CONTRACT, SITE_HELPER_MODULE } from '@kdgat/config';
import { sessionFor, type RunResult } from '@kdgat/transport';
import { environmentOfStage, type Manifest } from './manifest.ts';
import { connectionOf } from './site/site-copy.ts';

/** The folder of TensorBoard event files in a stage's run dir (the run contract's). */
export const TENSORBOARD_DIR = RUN_CONTRACT.runDir.files.tensorboard;

/** How deep below a log dir a stage's `tensorboard/` can be (`outputs/point_<i>/<dataset>/<stage>/tensorboard`). */
const MAX_DEPTH = 6;
/** What no stage's event files are under (large, or links to earlier runs' outputs). */
const SKIPPED = new Set(['checkpoints', 'profiler_traces', 'report', 'scripts', 'graph_cache', '.staged']);

/** The `tensorboard/` folders under `logDir`, relative to it, sorted (TensorBoard shows each as a run). */
export function tensorboardDirs(logDir: string): string[] {
  const found: string[] = [];
  const walk = (dir: string, depth: number): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory() || SKIPPED.has(e.name)) continue;
      const path = join(dir, e.name);
      if (e.name === TENSORBOARD_DIR) found.push(relative(logDir, path));
      else if (depth < MAX_DEPTH) walk(path, depth + 1);
    }
  };
  if (existsSync(logDir)) walk(logDir, 0);
  return found.sort();
}

/** The environment `tracking-sync` runs in: the stage's (`--stage`), else the experiment's. */
export function syncEnvironment(manifest: Manifest, stageId?: string): { name: string; activate: string } {
  const name = stageId === undefined ? manifest.environment.name : environmentOfStage(manifest, stageId).name;
  const env = manifest.stack.outputs.environments.find((e) => e.name === name);
  if (!env)
    throw new Error(
      `environment ${name} is not among stack ${manifest.stack.name}'s outputs recorded in the manifest: nothing to activate`,
    );
  return { name, activate: env.activate };
}

/**
 * The shell script `bash -s -- RUN_DIR CODE_DIR` reads: `python -m <helpers> tracking-sync --run-dir
 * RUN_DIR` in the environment, with the run's code snapshot (CODE_DIR/src; '' for none) first on
 * PYTHONPATH as in its jobs. The paths come as arguments (quoted once by the executor), never as text.
 */
export function trackingSyncScript(activate: string): string {
  return [
    'hpc_sync_run_dir=$1 hpc_sync_code=$2',
    "# The environment's activation (stack output environments[].activate)",
    activate.replace(/\n+$/, ''),
    'if [[ -n $hpc_sync_code ]]; then export PYTHONPATH="$hpc_sync_code/src${PYTHONPATH:+:$PYTHONPATH}"; fi',
    `exec python -m ${SITE_HELPER_MODULE} tracking-sync --run-dir "$hpc_sync_run_dir" </dev/null`,
    '',
  ].join('\n');
}

/** The argv that runs the script for a run (its site paths). */
export function trackingSyncArgv(manifest: Manifest): string[] {
  return ['bash', '-s', '--', manifest.runDir, manifest.code?.dir ?? ''];
}

/** How long an upload may take before it is stopped (W&B syncs every offline run of the run dir). */
export const SYNC_TIMEOUT_S = 3600;

/**
 * Runs `tracking-sync` for the run where its files are: on a site over SSH through the command's
 * SSH master (the login node has the network compute nodes lack), on a local stack here.
 */
export async function syncTracking(
  manifest: Manifest,
  stageId?: string,
): Promise<RunResult & { target: string; environment: string }> {
  const env = syncEnvironment(manifest, stageId);
  const session = sessionFor(connectionOf(manifest));
  const r = await session.run(trackingSyncArgv(manifest), {
    input: trackingSyncScript(env.activate),
    timeoutSeconds: SYNC_TIMEOUT_S,
  });
  return { ...r, target: session.target, environment: env.name };
}
