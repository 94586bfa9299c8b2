import { createHash } from 'node:crypto';
import type { EnvironmentSpec } from './schema.ts';

/**
 * The canonical environment.yml: name, channels in priority order, dependencies sorted one per
 * line, pip requirements sorted. Stable for the same spec, so a change diffs line by line
 * (`- pytorch=2.7` / `+ pytorch=2.8`). A venv renders its interpreter and requirements the same way.
 */
export function renderEnvironmentYml(env: EnvironmentSpec): string {
  const lines = [`name: ${env.name}`];
  const conda = env.backend === 'conda' ? [...new Set(env.dependencies)].sort() : [`python=${env.python}`];
  const pip = [...new Set(env.backend === 'conda' ? env.pip : env.requirements)].sort();
  if (env.backend === 'conda') {
    lines.push('channels:', ...env.channels.map((c) => `  - ${c}`));
  }
  lines.push('dependencies:', ...conda.map((d) => `  - ${d}`));
  if (pip.length > 0) lines.push('  - pip:', ...pip.map((p) => `      - ${p}`));
  return `${lines.join('\n')}\n`;
}

/** sha256 (hex) of the canonical text: what the runner compares with the provisioned stack. */
export function environmentSpecHash(env: EnvironmentSpec): string {
  return createHash('sha256').update(renderEnvironmentYml(env)).digest('hex');
}
