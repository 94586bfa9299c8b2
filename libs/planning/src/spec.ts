// The spec a run is made from: read from its file, loaded with @kdgat/config (positions in every
// error), and every stage's overrides and sweep point checked against the pipeline's schema.
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { validateOverrides, type ResolvedExperiment, type Scalar } from '@kdgat/config';

/** `--spec FILE`: its absolute path and text. */
export function readSpecFile(path: string): { file: string; text: string } {
  const file = resolve(path);
  if (!existsSync(file)) throw new Error(`--spec ${path}: no such file`);
  return { file, text: readFileSync(file, 'utf8') };
}

/** Checks stage overrides and every sweep point against the pipeline's JSON Schema. */
export function checkOverrides(resolved: ResolvedExperiment): void {
  const problems: string[] = [];
  const check = (where: string, overrides: Record<string, Scalar>) => {
    const result = (validateOverrides as (o: Record<string, Scalar>, s?: unknown) => unknown)(overrides);
    const issues = Array.isArray(result)
      ? result
      : result && typeof result === 'object' && 'issues' in result
        ? (result as { issues: unknown[] }).issues
        : [];
    for (const i of issues)
      problems.push(
        `${where}: ${typeof i === 'string' ? i : ((i as { message?: string }).message ?? JSON.stringify(i))}`,
      );
  };
  for (const s of resolved.stages) {
    check(`stages.${s.id}.overrides`, s.overrides as Record<string, Scalar>);
    resolved.sweepPoints.forEach((p, i) =>
      check(`sweep point ${i} (stage ${s.id})`, {
        ...(s.overrides as Record<string, Scalar>),
        ...(p as Record<string, Scalar>),
      }),
    );
  }
  if (problems.length > 0)
    throw new Error(`overrides rejected by the pipeline schema:\n  ${problems.join('\n  ')}`);
}
