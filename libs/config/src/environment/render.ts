import { createHash } from 'node:crypto';
import { repositorySources, sitePackages, siteSourceOptions, type PipelineSources } from './gpu-layers.ts';
import type { EnvironmentSpec } from './schema.ts';

/**
 * The pip requirements an environment installs, sorted: with a `gpuLayer`, every pin of the
 * pipeline (python/uv.lock) and of the layer (python/gpu/<layer>.lock) as `name==version`, then the
 * spec's own `pip:` lines; a venv's `requirements` (after the pipeline's pins with `pipelinePins`).
 */
export function pipRequirements(
  env: EnvironmentSpec,
  sources: PipelineSources = repositorySources,
): string[] {
  // A package of a second index: its file by direct reference (`name @ url#sha256=…`), so it comes
  // from exactly there; every other one by its pin, from the site's own index.
  const site = sitePackages(env, sources).map((p) =>
    p.url ? `${p.name} @ ${p.url}` : `${p.name}==${p.version}`,
  );
  // A requirements-file lock's package sources first, in its order: pip reads them as options.
  if (env.backend === 'venv')
    return [...siteSourceOptions(env), ...[...new Set([...site, ...env.requirements])].sort()];
  return [...new Set([...site, ...env.pip])].sort();
}

/**
 * The canonical environment.yml: name, channels in priority order, dependencies sorted one per
 * line, pip requirements sorted. Stable for the same spec, so a change diffs line by line
 * (`- pytorch=2.7` / `+ pytorch=2.8`, `- numpy==2.4.6` / `+ numpy==2.4.7` after a uv.lock bump).
 * A venv renders its interpreter and requirements the same way. The environment's site modules,
 * when it names any, follow as comment lines in their load order.
 */
export function renderEnvironmentYml(
  env: EnvironmentSpec,
  sources: PipelineSources = repositorySources,
): string {
  const lines = [`name: ${env.name}`];
  const conda = env.backend === 'conda' ? [...new Set(env.dependencies)].sort() : [`python=${env.python}`];
  const pip = pipRequirements(env, sources);
  if (env.backend === 'conda') {
    lines.push('channels:', ...env.channels.map((c) => `  - ${c}`));
  }
  lines.push('dependencies:', ...conda.map((d) => `  - ${d}`));
  if (pip.length > 0) lines.push('  - pip:', ...pip.map((p) => `      - ${p}`));
  // The site modules, in their load order, as comments: part of the spec (a change rebuilds and
  // shows in the preview's diff) that no frontend reads. None: the text (and hash) as before.
  const modules = env.modules ?? [];
  if (modules.length > 0)
    lines.push(
      '# modules (module load, in this order, before the interpreter runs):',
      ...modules.map((m) => `#   - ${m}`),
    );
  return `${lines.join('\n')}\n`;
}

/** sha256 (hex) of the canonical text: what the runner compares with the provisioned stack. */
export function environmentSpecHash(
  env: EnvironmentSpec,
  sources: PipelineSources = repositorySources,
): string {
  return createHash('sha256').update(renderEnvironmentYml(env, sources)).digest('hex');
}
