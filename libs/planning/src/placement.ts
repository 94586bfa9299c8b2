// Placement across a site's clusters (`train --cluster NAME|auto`, `plan`): per cluster, whether the
// spec fits there, when the controller says each stage would start (`sbatch --test-only -M`) and
// what the run would charge; `auto` takes the earliest expected start within the budget, a tie
// going to the cheaper. Pure: libs/runs/src/place.ts asks the clusters and records the choice.

/** What `sbatch --test-only` said of one stage's first job on one cluster. */
export interface PlacementStage {
  stageId: string;
  /** The controller accepted the job's request (true where it was not asked: a site not provisioned). */
  ok: boolean;
  /** The stage's worst case there (every task to its time limit), in the cluster's unit; null without rates. */
  worst?: number | null;
  /** When it would start, as the site prints it (its local time, `2026-11-27T22:04:37`). */
  start?: string;
  nodes?: string;
  partition?: string;
  /** The scheduler's own words (why not, when not ok); empty where it was not asked. */
  message: string;
}

/** One cluster, as placement saw it. */
export interface PlacementCandidate {
  /** The cluster profile's name. */
  cluster: string;
  /** Its SLURM name. */
  clusterName: string;
  /** The `-M` its commands name: one of the site's other clusters (absent: the spec's own). */
  via?: string;
  /** The spec resolves there (partitions, resources, environments) and every stage was accepted. */
  fits: boolean;
  /** Why it does not fit. */
  reason?: string;
  stages: PlacementStage[];
  /** The run's expected start: the latest of its stages' (each asked alone, dependencies aside). */
  start?: string;
  /** The run's worst and expected charge, in the cluster's billing unit; null without rates. */
  cost?: { unit: string; worst: number | null; expected: number | null };
  /** The worst case is within the spec's budget (true where the spec sets none). */
  withinBudget: boolean;
}

/** Where a run was placed and why: recorded in its manifest. */
export interface Placement {
  cluster: string;
  clusterName: string;
  /**
   * The `-M` every scheduler command of the run names: one of the site's other clusters. Absent for
   * the spec's own cluster, the one the login node's SLURM commands reach without it.
   */
  via?: string;
  /** `auto`: chosen by start and cost; `named`: `--cluster NAME`; `default`: the spec's own cluster. */
  mode: 'auto' | 'named' | 'default';
  why: string;
  /** Every cluster asked (absent where none was: `train` without --cluster). */
  candidates?: PlacementCandidate[];
}

/** Starts this close count as one: the cheaper cluster wins the tie. */
export const PLACEMENT_TIE_SECONDS = 300;

/** Seconds since the epoch of a start as `sbatch --test-only` prints it (compared, never shown). */
function startSeconds(start: string): number {
  return Date.parse(`${start}Z`) / 1000;
}

/** The run's expected start: its stages' latest (undefined when a stage has none). */
export function runStart(stages: readonly PlacementStage[]): string | undefined {
  if (stages.length === 0 || stages.some((s) => !s.start)) return undefined;
  return stages.map((s) => s.start!).reduce((a, b) => (startSeconds(b) > startSeconds(a) ? b : a));
}

/**
 * `auto`: among the clusters that fit and are within the budget, the earliest expected start; starts
 * within PLACEMENT_TIE_SECONDS of it tie, and the cheapest worst case among them wins (then the
 * stack's order). Undefined, with the reason, when none qualifies.
 */
export function chooseCluster(candidates: readonly PlacementCandidate[]): {
  chosen?: PlacementCandidate;
  why: string;
} {
  const eligible = candidates.filter((c) => c.fits && c.withinBudget && c.start);
  if (eligible.length === 0) {
    const why = candidates
      .map((c) =>
        !c.fits
          ? `${c.cluster}: ${c.reason ?? 'does not fit'}`
          : !c.withinBudget
            ? `${c.cluster}: over the budget`
            : `${c.cluster}: no start time`,
      )
      .join('; ');
    return { why: `no cluster can run it (${why})` };
  }
  const earliest = Math.min(...eligible.map((c) => startSeconds(c.start!)));
  const tied = eligible.filter((c) => startSeconds(c.start!) - earliest <= PLACEMENT_TIE_SECONDS);
  const worst = (c: PlacementCandidate) => c.cost?.worst ?? Number.POSITIVE_INFINITY;
  const chosen = tied.reduce((a, b) => (worst(b) < worst(a) ? b : a));
  const others = eligible.filter((c) => c !== chosen);
  const later = others.filter((c) => !tied.includes(c));
  const parts = [`expected start ${chosen.start}`];
  if (later.length > 0)
    parts.push(`earlier than ${later.map((c) => `${c.cluster} (${c.start})`).join(', ')}`);
  const ties = tied.filter((c) => c !== chosen);
  if (ties.length > 0)
    parts.push(
      `cheaper than ${ties.map((c) => `${c.cluster} (${formatCost(c.cost)})`).join(', ')}, which would start within ${PLACEMENT_TIE_SECONDS / 60} min of it`,
    );
  const excluded = candidates.filter((c) => !eligible.includes(c));
  if (excluded.length > 0)
    parts.push(
      excluded
        .map(
          (c) =>
            `${c.cluster} ${!c.fits ? `does not fit (${c.reason ?? ''})` : !c.withinBudget ? 'is over the budget' : 'gave no start time'}`,
        )
        .join(', '),
    );
  return { chosen, why: parts.join('; ') };
}

function formatUnits(x: number | null): string {
  return x === null ? '?' : x < 10 ? x.toFixed(2) : x.toFixed(0);
}

function formatCost(cost: PlacementCandidate['cost']): string {
  if (!cost || cost.worst === null) return 'no rates';
  return `${formatUnits(cost.expected)} expected, ${formatUnits(cost.worst)} worst ${cost.unit}`;
}

/** The plan's table: per cluster and stage, fits, expected start and charge; then the choice. */
export function placementLines(placement: Placement): string[] {
  const lines: string[] = [];
  for (const c of placement.candidates ?? []) {
    const mark = c.cluster === placement.cluster ? '*' : ' ';
    const start = c.start ? `starts ${c.start}` : 'start unknown';
    const where = c.via ? `-M ${c.via}` : "the login node's own";
    const head = c.fits
      ? `${mark} cluster ${c.cluster} (${where}): ${start}, ${formatCost(c.cost)}${c.withinBudget ? '' : ', over the budget'}`
      : `${mark} cluster ${c.cluster} (${where}): does not fit: ${c.reason ?? ''}`;
    lines.push(head);
    const unit = c.cost?.unit ?? '';
    for (const s of c.stages) {
      const charge =
        s.worst === undefined
          ? ''
          : s.worst === null
            ? ', no rates'
            : `, worst ${formatUnits(s.worst)} ${unit}`;
      lines.push(
        s.ok
          ? `    ${s.stageId}: fits, ${s.start ? `starts ${s.start}` : 'start unknown'}${s.partition ? ` in ${s.partition}` : ''}${s.nodes ? ` on ${s.nodes}` : ''}${charge}`
          : `    ${s.stageId}: refused: ${s.message}${charge}`,
      );
    }
  }
  lines.push(`placement: cluster ${placement.cluster} (${placement.mode}): ${placement.why}`);
  return lines;
}
