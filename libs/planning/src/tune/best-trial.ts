// `train --from-study S --best`: the spec with the study's best trial applied. Its values become
// the tuned stage's overrides and the tune: section goes (this is a training run now). Returned
// as JSON text (valid YAML), which the manifest records, so `--from-manifest` reproduces the run.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseYaml, type Scalar } from '@kdgat/config';
import type { StackOutputs } from '../stack/outputs.ts';
import { STUDY_FILE, resolveStudyDir, runTuneReport } from './study.ts';

/** Where a run trained from a study's best trial came from (kept in its manifest). */
export interface FromStudy {
  study: string;
  studyDir: string;
  stageId: string;
  trial: number;
  metric: string;
  value: number;
  params: Record<string, Scalar>;
}

export async function applyBestTrial(
  specText: string,
  specFile: string,
  studyArg: string,
  stack: StackOutputs,
): Promise<{ text: string; provenance: FromStudy }> {
  const studyDir = resolveStudyDir(studyArg, stack.scratch.runsDir);
  const config = JSON.parse(readFileSync(join(studyDir, STUDY_FILE), 'utf8')) as {
    study: string;
    stageId: string;
    objective: { metric: string };
  };
  const report = await runTuneReport(stack, studyDir, { json: true, plots: false });
  const best = report.best;
  if (!best) {
    const c = report.counts;
    throw new Error(
      `study ${config.study} has no complete trial yet (${c['RUNNING'] ?? 0} running, ${c['PRUNED'] ?? 0} pruned, ${c['FAIL'] ?? 0} failed): wait for it, see \`nx run runner:tune-report --study ${config.study}\``,
    );
  }
  const parsed = parseYaml(specText, specFile);
  if (parsed.syntaxIssues.length) throw new Error(`${specFile}: ${parsed.syntaxIssues[0]!.message}`);
  const spec = structuredClone(parsed.value) as {
    stages?: { id?: string; overrides?: Record<string, Scalar> }[];
    tune?: unknown;
  };
  const stage = spec.stages?.find((s) => s.id === config.stageId);
  if (!stage)
    throw new Error(
      `study ${config.study} tuned stage ${config.stageId}, which ${specFile} does not have: pass the spec the study was made from`,
    );
  stage.overrides = { ...(stage.overrides ?? {}), ...best.params };
  delete spec.tune;
  return {
    text: `${JSON.stringify(spec, null, 2)}\n`,
    provenance: {
      study: config.study,
      studyDir,
      stageId: config.stageId,
      trial: best.number,
      metric: config.objective.metric,
      value: best.value,
      params: best.params,
    },
  };
}
