// The place phase, on a site of several clusters (stack config `clusters`, reached from one login
// node with `-M`): the spec resolved against each cluster's profile (its partitions, charging and
// limits), planned and costed there, and each stage's first script asked of that cluster's
// controller with `sbatch --test-only -M` (on stdin: nothing is written on the site). `--cluster
// NAME` runs there, `--cluster auto` takes the earliest expected start within the budget (a tie to
// the cheaper; libs/planning/src/placement.ts); without it the spec's own cluster. `plan` prints
// every cluster; the manifest records where the run went and why.
import { environmentClusterProblems, loadExperimentSpec, type ClusterProfile } from '@kdgat/config';
import {
  chooseCluster,
  estimatePlanCost,
  isDeclaredOnly,
  placementLines,
  renderPlan,
  runStart,
  type Placement,
  type PlacementCandidate,
  type PlacementStage,
} from '@kdgat/planning';
import { parseTestOnlyStart, schedulerFor, UnprovisionedSlurm, type Scheduler } from '@kdgat/schedulers';
import { size } from './cost.ts';
import { planJobs } from './jobs.ts';
import type { Placed, RunOptions, Site, Spec } from './types.ts';

/** The spec resolved against another cluster of the site (its pipeline's code kept). */
export function specFor(spec: Spec, profile: ClusterProfile): Spec {
  if (profile.name === spec.resolved.cluster.name) return spec;
  const loaded = loadExperimentSpec({ text: spec.text, file: spec.file }, { cluster: profile });
  const resolved = { ...loaded.resolved, pipeline: spec.resolved.pipeline };
  return { ...spec, loaded: { ...loaded, resolved }, resolved };
}

/**
 * The scheduler of one cluster of the site: SLURM commands with `-M <via>` for one of its other
 * clusters, without `-M` for the spec's own (the login node's).
 */
export function clusterScheduler(site: Site, via: string | undefined, opts: RunOptions): Scheduler {
  if (opts.schedulerInstance) return opts.schedulerInstance;
  return isDeclaredOnly(site.outputs)
    ? new UnprovisionedSlurm(site.name)
    : schedulerFor('slurm', site.runsRoot, site.files ? site.connection : { kind: 'local' }, via);
}

/** `-M` for a cluster of the site: none for the spec's own. */
function viaOf(profile: ClusterProfile, own: ClusterProfile): { via?: string } {
  return profile.name === own.name ? {} : { via: profile.clusterName };
}

function firstLine(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  const lines = text.split('\n').map((l) => l.trim());
  // A spec validation error: its first problem says why (its file:line:column left out).
  const line = lines.length > 1 && /is invalid/.test(lines[0]!) ? lines[1]! : lines[0]!;
  return line.replace(/^\S+:\d+:\d+: /, '');
}

/** One cluster: does the spec fit, when would each stage start, what would the run charge. */
async function candidate(
  spec: Spec,
  profile: ClusterProfile,
  site: Site,
  opts: RunOptions,
): Promise<{ candidate: PlacementCandidate; there?: Spec }> {
  const base = {
    cluster: profile.name,
    clusterName: profile.clusterName,
    ...viaOf(profile, spec.resolved.cluster),
  };
  const unfit = (reason: string): { candidate: PlacementCandidate } => ({
    candidate: { ...base, fits: false, reason, stages: [], withinBudget: false },
  });
  let there: Spec;
  try {
    there = specFor(spec, profile);
  } catch (e) {
    return unfit(firstLine(e));
  }
  for (const [name, env] of Object.entries(there.resolved.environments)) {
    const problem = environmentClusterProblems(env, profile)[0];
    if (problem) return unfit(`environment ${name}: ${problem.message}`);
  }
  const scheduler = clusterScheduler(site, base.via, opts);
  try {
    const plan = await planJobs(there, scheduler);
    const sized = size(there, site, opts);
    const estimate = estimatePlanCost(sized.spec.resolved, sized.spec.resolved.stages, plan, sized.histories);
    const budget = there.resolved.spec.budget?.maxBillingUnits;
    const worst = estimate.worst.units;
    const cost = { unit: estimate.unit ?? '', worst, expected: estimate.expected.units };
    const withinBudget = budget === undefined || (worst !== null && worst <= budget);
    const stages: PlacementStage[] = [];
    const rendered = scheduler.probe
      ? renderPlan(plan, sized.spec.resolved, site.outputs, placementRunDir(site, spec), 'slurm')
      : [];
    for (const stageId of [...new Set(plan.jobs.map((j) => j.stageId))]) {
      const worst = estimate.stages.find((c) => c.id === stageId)?.worst.units ?? null;
      const first = rendered.find((r) => r.job.stageId === stageId);
      if (!first || !scheduler.probe) {
        stages.push({ stageId, ok: true, worst, message: '' });
        continue;
      }
      const said = await scheduler.probe(first.script);
      const start = said.ok ? parseTestOnlyStart(said.message) : undefined;
      stages.push({ stageId, ok: said.ok, worst, message: said.message, ...(start ?? {}) });
    }
    const refused = stages.find((s) => !s.ok);
    const start = runStart(stages);
    return {
      there,
      candidate: {
        ...base,
        fits: refused === undefined,
        ...(refused ? { reason: `${refused.stageId}: ${refused.message}` } : {}),
        stages,
        ...(start ? { start } : {}),
        cost,
        withinBudget,
      } satisfies PlacementCandidate,
    };
  } catch (e) {
    return unfit(firstLine(e));
  }
}

/** Where the probe scripts say they would write: never created (the scripts go on stdin). */
function placementRunDir(site: Site, spec: Spec): string {
  return `${site.outputs.scratch.runsDir.replace(/\/+$/, '')}/${spec.resolved.spec.name}/placement-probe`;
}

/**
 * Place: on a site of one cluster, the spec's (`--cluster` may only name it); on a site of several,
 * `--cluster NAME`, `--cluster auto`, or the spec's own cluster. `plan` and `auto` ask every
 * cluster and print the table; `train --cluster NAME` asks none (its preflight asks that one).
 */
export async function place(
  spec: Spec,
  site: Site,
  opts: RunOptions & { dryRun: boolean },
  log: (line: string) => void,
): Promise<Placed> {
  const own = spec.resolved.cluster;
  const members = site.outputs.clusters ?? [];
  const recorded = (spec.source as { placement?: Placement } | undefined)?.placement;
  const wanted = opts.cluster ?? (recorded && recorded.mode !== 'default' ? recorded.cluster : undefined);
  const profiles = [own, ...members.filter((m) => m.name !== own.name)];
  const kind = opts.scheduler ?? spec.source?.scheduler ?? own.scheduler;
  if (kind === 'local' && members.length > 0) {
    if (opts.cluster !== undefined)
      throw new Error(
        `--cluster ${opts.cluster}: the local scheduler runs jobs on this machine only; use --scheduler slurm`,
      );
    return { spec };
  }
  if (members.length === 0) {
    if (wanted !== undefined && wanted !== 'auto' && wanted !== own.name && wanted !== own.clusterName)
      throw new Error(
        `--cluster ${wanted}: stack ${site.name} declares one cluster (${own.name}); declare the site's others in its config's \`clusters\``,
      );
    if (wanted === 'auto') log(`note: --cluster auto: stack ${site.name} has one cluster, ${own.name}`);
    return { spec };
  }
  const named =
    wanted !== undefined && wanted !== 'auto'
      ? profiles.find((p) => p.name === wanted || p.clusterName === wanted)
      : undefined;
  if (wanted !== undefined && wanted !== 'auto' && !named)
    throw new Error(
      `--cluster ${wanted}: not a cluster of stack ${site.name}; expected one of ${profiles.map((p) => p.name).join(', ')} or auto`,
    );
  const mode: Placement['mode'] = wanted === 'auto' ? 'auto' : named ? 'named' : 'default';
  const chosenWhy =
    mode === 'named'
      ? `--cluster ${wanted}${opts.cluster === undefined ? " (the reproduced run's)" : ''}`
      : `the spec's cluster; \`--cluster auto\` compares the site's ${profiles.length} clusters (${profiles.map((q) => q.name).join(', ')})`;
  if (!opts.dryRun && mode !== 'auto') {
    const p = named ?? own;
    const placement: Placement = {
      cluster: p.name,
      clusterName: p.clusterName,
      ...viaOf(p, own),
      mode,
      why: chosenWhy,
    };
    log(`placement: cluster ${p.name}${placement.via ? ` (-M ${placement.via})` : ''}: ${placement.why}`);
    return { spec: specFor(spec, p), placement };
  }
  log(
    isDeclaredOnly(site.outputs)
      ? `placement: ${profiles.length} clusters (stack ${site.name} is not provisioned: fits and cost only; start times need its live clusters)`
      : `placement: asking ${profiles.length} clusters (sbatch --test-only -M each, one probe per stage)`,
  );
  const asked = [];
  for (const p of profiles) asked.push(await candidate(spec, p, site, opts));
  const candidates = asked.map((a) => a.candidate);
  let chosen: PlacementCandidate;
  let why: string;
  if (mode === 'auto') {
    const choice = chooseCluster(candidates);
    if (!choice.chosen) {
      for (const line of placementLines({
        cluster: '-',
        clusterName: '-',
        mode,
        why: choice.why,
        candidates,
      }))
        log(line);
      throw new Error(`--cluster auto: ${choice.why}; nothing was queued`);
    }
    chosen = choice.chosen;
    why = choice.why;
  } else {
    const p = named ?? own;
    chosen = candidates.find((c) => c.cluster === p.name)!;
    why = chosenWhy;
  }
  const placement: Placement = {
    cluster: chosen.cluster,
    clusterName: chosen.clusterName,
    ...viaOf(
      profiles.find((p) => p.name === chosen.cluster)!,
      own,
    ),
    mode,
    why,
    candidates,
  };
  for (const line of placementLines(placement)) log(line);
  // A named or the spec's own cluster that does not fit is still planned: its preflight says why.
  const there =
    asked.find((a) => a.candidate === chosen)?.there ??
    specFor(
      spec,
      profiles.find((p) => p.name === chosen.cluster)!,
    );
  return { spec: there, placement };
}
