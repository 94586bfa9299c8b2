// Test tools: the pinned py-rattler tool venv (outside the repo, in the tool cache) and the
// builders of the local package sources (a conda channel, a wheel directory).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const PY_RATTLER_VERSION = '0.28.0';
const fixtures = new URL('./fixtures/', import.meta.url).pathname;

/** Python of `<tools>/tools/py-rattler-<ver>`, created with uv on first use. */
export function rattlerPython(): string {
  const root = process.env.HPC_TOOLS ?? join(homedir(), '.cache', 'kdgat-hpc');
  const venv = join(root, 'tools', `py-rattler-${PY_RATTLER_VERSION}`);
  const python = join(venv, 'bin', 'python');
  if (!existsSync(python)) {
    execFileSync('uv', ['venv', '-q', '-p', 'python3', venv], { stdio: 'inherit' });
    execFileSync('uv', ['pip', 'install', '-q', '-p', python, `py-rattler==${PY_RATTLER_VERSION}`], {
      stdio: 'inherit',
    });
  }
  return python;
}

/** A local conda channel of tiny noarch packages, e.g. `alpha=1.0`, `beta=0.1:alpha` (with deps). */
export function makeCondaChannel(dir: string, packages: string[]): string {
  execFileSync(rattlerPython(), [join(fixtures, 'make_conda_channel.py'), dir, ...packages]);
  return `file://${dir}`;
}

/** A directory of tiny wheels, e.g. `alpha==1.0`. */
export function makeWheels(dir: string, packages: string[]): string {
  execFileSync('python3', [join(fixtures, 'make_wheels.py'), dir, ...packages]);
  return dir;
}
