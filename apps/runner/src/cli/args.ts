// The command line: usage text and the options argv is parsed with (what a command is then
// handed, and the helpers commands share, are in commands/kit.ts).
import type { Flags } from '../commands/kit.ts';

export const USAGE = `kdgat-runner — turn an experiment spec into SLURM jobs (or local runs), check them before
queueing, follow them, and record a manifest.

usage:
  kdgat-runner init   [DIR]                                  a starting workspace for your repository (DIR,
                                                             default .): kdgat-hpc.yaml, stacks/local.yaml,
                                                             hpc/NAME.pipeline.yaml, .environment.yaml and
                                                             hpc/specs/NAME.yaml from its pyproject.toml,
                                                             uv.lock and CLI; a TODO(kdgat-hpc) line for
                                                             each value it cannot know; overwrites nothing
  kdgat-runner infra  preview|up|refresh|destroy [--stack NAME] [-- FLAGS]
                                                             the workspace's stack (stacks/NAME.yaml) through
                                                             Pulumi: environments, scratch, site scripts
                                                             (FLAGS: infra/bin/pulumi-stack.sh's, e.g.
                                                             --summary, or pulumi's own)
  kdgat-runner train  --spec FILE.yaml [--stack NAME] [--cluster NAME|auto] [--wait] [--force] [--right-size] [--allow-dirty]
  kdgat-runner train  --from-manifest RUN_DIR|manifest.json [--stack NAME] [--wait] [--force] [--allow-env-change]
  kdgat-runner train  --spec FILE.yaml --from-study STUDY --best [--stack NAME] [--wait]
  kdgat-runner plan   --spec FILE.yaml [--stack NAME] [--cluster NAME|auto]
                                                             render + preflight, submit nothing
                                                             (a stack not provisioned yet: planned from
                                                             the workspace's stacks/NAME.yaml; preflight skipped)
  kdgat-runner tune   --spec FILE.yaml [--stack NAME] [--wait] [--dry-run]
                                                             the spec's tune: study as a worker array
  kdgat-runner tune-report --study NAME|DIR [--stack NAME] [--json]
                                                             trial counts, pruning rate, durations, best
  kdgat-runner status RUN_DIR [--json]                       state of every job and array task
  kdgat-runner resume RUN_DIR [--wait]                       resubmit the failures a run can survive
                                                             (NODE_FAIL: another node; OUT_OF_MEMORY:
                                                             more memory or a smaller batch; TIMEOUT
                                                             without the requeue handshake: more time),
                                                             each from checkpoints/last.ckpt; --wait
                                                             follows it (train --wait does this too)
  kdgat-runner logs   RUN_DIR [--job KEY] [--index N] [--lines N]
  kdgat-runner cancel RUN_DIR                                cancel every job of the run
  kdgat-runner report RUN_DIR                                report.html + PNGs: curves, usage, verdict,
                                                             the run's rows in the catalogue
  kdgat-runner runs   [--stack NAME] [--where EXPR] [--sort COL[:desc],…] [--columns C,…|all] [--json]
                                                             the table of all runs (the catalogue: one
                                                             row per finished stage, array task and
                                                             study trial), e.g. --where 'dataset=hcrl_sa,
                                                             f1>0.9' --sort f1:desc (a leaderboard)
  kdgat-runner tensorboard RUN_DIR|--study NAME [--stack NAME] [--serve [--port N]]
                                                             the TensorBoard log dir (on a site: its
                                                             path there, for OnDemand's TensorBoard app,
                                                             and the local copy's); --serve starts
                                                             TensorBoard here on 127.0.0.1
  kdgat-runner sync   RUN_DIR [--stack NAME] [--stage ID]    upload what the jobs tracked offline (W&B):
                                                             the tracking-sync helper on the
                                                             site's login node (a local stack: here)
  kdgat-runner shell  [--stack NAME] [--spec FILE.yaml [--stage ID]] [--cluster NAME] [--partition P]
                      [--cpus N] [--mem-gb N] [--gpus N] [--time HH:MM:SS]
                                                             an interactive shell in an allocation on the
                                                             site, as the stage's job sees it: its
                                                             partition and resources, modules,
                                                             environment, code snapshot and staged
                                                             caches; prints what it charges first.
                                                             Without --spec: the cluster profile's
                                                             default partition, 2 cpus, 8 GB, 1 hour
                                                             (and a GPU on a GPU partition)

options:
  --workspace DIR        the workspace: the folder of your stacks (stacks/NAME.yaml), specs and
                         declarations, marked by its kdgat-hpc.yaml (default: the first one in the
                         current directory or above, else $KDGAT_HPC_WORKSPACE, else this checkout's
                         own); relative paths in its stack files resolve against it, and the
                         runner's local files (copies of site runs, plans) go to its .hpc/
  --spec FILE            experiment spec (YAML), validated with @kdgat/config
  --stack NAME           infra stack whose outputs to use (default: local)
  --stack-outputs FILE   read stack outputs from a JSON file instead of \`pulumi stack output\`
  --scheduler KIND       slurm | local (default: the cluster profile's scheduler)
  --cluster NAME|auto    a site of several clusters (stack config \`clusters\`): run on that one (-M),
                         or \`auto\`: the earliest expected start (sbatch --test-only on each) within
                         the budget, a tie (within 5 min) to the cheaper; plan shows every cluster;
                         shell: open it on that cluster (salloc -M), on its partitions and rates
  --wait                 follow the run to the end, resubmitting the failures it can survive
                         (at most requeue.maxRecoveries per job, within the budget); exit non-zero
                         if any job did not complete
  --force                submit even if a run of the same spec is queued or running
  --from-manifest PATH   re-render and submit a recorded run (same scripts, byte for byte); refused
                         when the environment's lock changed since, listing the packages that differ
  --allow-env-change     with --from-manifest: run on the changed environment anyway
  --from-study STUDY     with --best: train the study's best trial (its values as the tuned stage's overrides)
  --study NAME|DIR       a study: its name (tune.study) or its directory
  --dry-run              tune: render + preflight, submit nothing
  --right-size           train: request the cpus, memGB and time that plan suggests from earlier runs
  --allow-dirty          a site over ssh: send python/ with uncommitted changes (the diff is kept in
                         the run dir and named in the manifest); without it such a tree is refused
  --stage ID             shell: the spec's stage whose job the shell reproduces (a spec of one stage:
                         that one)
  --partition P          shell: another partition of the cluster profile than the stage's
  --cpus N, --mem-gb N, --gpus N, --time HH:MM:SS
                         shell: cpus per task, memory per node, GPUs per node, time limit instead of
                         the stage's; each must fit a node of the partition
  --where EXPR           runs: conditions joined by ',' (AND): COLUMN OP VALUE with OP = != > >= < <=
                         or ~ (a glob on text), VALUE null for an absent one; e.g. state=COMPLETED,f1>0.9
  --sort COL[:desc],…    runs: the order (nulls last; default finished_at); --columns C,…|all: the columns
  --serve, --port N      tensorboard: start TensorBoard here (127.0.0.1, port 6006 unless --port)

A stack whose connection is ssh is reached over one SSH master per command: scripts, the code
snapshot and the manifest are written on the site; status, logs, report and tensorboard bring back a
local copy of the run (.hpc/sites/STACK/runs/…) and say how fresh it is; runs brings back the
catalogue (.hpc/sites/STACK/runs/catalogue).
  -h, --help             this text

exit status: 0 ok · 1 a job failed or an error · 2 bad arguments or invalid spec ·
             3 refused (stack not provisioned, preflight, already queued, environment changed, over budget)`;

export const OPTIONS = {
  workspace: { type: 'string' },
  spec: { type: 'string' },
  stack: { type: 'string' },
  'stack-outputs': { type: 'string' },
  scheduler: { type: 'string' },
  cluster: { type: 'string' },
  wait: { type: 'boolean' },
  force: { type: 'boolean' },
  'from-manifest': { type: 'string' },
  'allow-env-change': { type: 'boolean' },
  run: { type: 'string' },
  job: { type: 'string' },
  index: { type: 'string' },
  lines: { type: 'string' },
  json: { type: 'boolean' },
  'from-study': { type: 'string' },
  best: { type: 'boolean' },
  study: { type: 'string' },
  'dry-run': { type: 'boolean' },
  'right-size': { type: 'boolean' },
  'allow-dirty': { type: 'boolean' },
  stage: { type: 'string' },
  partition: { type: 'string' },
  cpus: { type: 'string' },
  'mem-gb': { type: 'string' },
  gpus: { type: 'string' },
  time: { type: 'string' },
  where: { type: 'string' },
  sort: { type: 'string' },
  columns: { type: 'string' },
  serve: { type: 'boolean' },
  port: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const BOOLEAN_FLAGS = new Set(
  Object.entries(OPTIONS)
    .filter(([, o]) => o.type === 'boolean')
    .map(([k]) => k),
);

/** Nx forwards booleans as `--wait=true`; parseArgs wants bare flags. */
export function normaliseArgv(argv: readonly string[]): string[] {
  return argv.flatMap((a) => {
    const m = /^--([a-z-]+)=(true|false)$/.exec(a);
    if (m && BOOLEAN_FLAGS.has(m[1]!)) return m[2] === 'true' ? [`--${m[1]}`] : [];
    return [a];
  });
}

type Parsed = {
  -readonly [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'boolean' ? boolean : string;
};

type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** Compiles only while the options parsed are exactly the flags commands read (`Flags`). */
export const FLAGS_MATCH_OPTIONS: Same<Parsed, Flags> = true;
