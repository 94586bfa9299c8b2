// A site's module tree for the real Lmod (Debian `lmod`, from scripts/bootstrap.sh): the rattler-based
// conda frontend and a CUDA stand-in, each reachable only through `module load`, as on OSC where
// `conda` comes from `module load miniconda3`.
import { chmodSync, mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

export interface ModuleTree {
  /** Directory to put on MODULEPATH. */
  modulePath: string;
  /** The profile's modules: conda frontend and CUDA. */
  modules: { conda: string; cuda: string };
  /** Command the frontend module puts on PATH (a Python with py-rattler). */
  frontendCommand: string;
  /** `$LOADEDMODULES` as the frontend saw it, one line per call. */
  frontendCalls(): string[];
}

const lua = (s: string) => JSON.stringify(s);

export function makeModuleTree(root: string, rattlerPython: string): ModuleTree {
  const modulePath = join(root, 'modulefiles');
  const frontendBin = join(root, 'apps', 'py-rattler', 'bin');
  const cudaHome = join(root, 'apps', 'cuda-12.4.1');
  const log = join(root, 'apps', 'frontend-calls.log');
  mkdirSync(frontendBin, { recursive: true });
  mkdirSync(join(cudaHome, 'bin'), { recursive: true });
  mkdirSync(join(modulePath, 'py-rattler'), { recursive: true });
  mkdirSync(join(modulePath, 'cuda'), { recursive: true });
  const frontend = join(frontendBin, 'rattler-python');
  writeFileSync(
    frontend,
    `#!/bin/sh\nprintf '%s\\n' "\${LOADEDMODULES:-}" >>'${log}'\nexec '${rattlerPython}' "$@"\n`,
  );
  chmodSync(frontend, 0o755);
  writeFileSync(
    join(modulePath, 'py-rattler', '0.28.0.lua'),
    `whatis("py-rattler 0.28.0: the conda frontend of the e2e site")\nprepend_path("PATH", ${lua(frontendBin)})\n`,
  );
  writeFileSync(
    join(modulePath, 'cuda', '12.4.1.lua'),
    `whatis("CUDA 12.4.1 stand-in (no toolkit here)")\nsetenv("CUDA_HOME", ${lua(cudaHome)})\n` +
      `prepend_path("PATH", ${lua(join(cudaHome, 'bin'))})\n`,
  );
  return {
    modulePath,
    modules: { conda: 'py-rattler/0.28.0', cuda: 'cuda/12.4.1' },
    frontendCommand: 'rattler-python',
    frontendCalls: () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []),
  };
}
