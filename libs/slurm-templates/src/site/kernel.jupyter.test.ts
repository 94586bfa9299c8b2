// The kernel files with the real jupyter_client: the kernelspec is found in a kernels dir, the
// kernel starts through kernel.sh (the venv's activation, the code first on PYTHONPATH), imports
// the pipeline and prints the environment's lock hash. The repository's python/.venv (uv sync) is
// the environment; it carries ipykernel and jupyter_client (python/pyproject.toml).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { localProfile } from '../fixtures.test-support.ts';
import { activationSnippet } from '../script-sections/script-sections.ts';
import { runsHere } from '../test-support/skips.ts';
import { renderKernelFiles } from './kernel.ts';
import { JUPYTER_DRIVER as DRIVER } from './jupyter-driver.ts';

const REPO = new URL('../../../../', import.meta.url).pathname.replace(/\/$/, '');
const VENV = join(REPO, 'python', '.venv');
const PYTHON = join(VENV, 'bin', 'python');
const TIMEOUT_S = 120;

const hasVenv = runsHere(
  existsSync(PYTHON),
  'the notebook kernel with the real jupyter_client',
  'python/.venv is missing (npm run bootstrap makes it)',
);

describe.runIf(hasVenv)('a kernel of the repository venv, started by jupyter_client', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'kdgat-kernel-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('starts from its kernelspec, imports kdgat from the code and torch_geometric, and prints the lock hash', () => {
    const lockHash = createHash('sha256')
      .update(readFileSync(join(REPO, 'python', 'uv.lock')))
      .digest('hex');
    const environment = { name: 'cpu-local', backend: 'venv' as const, prefix: VENV };
    const code = join(REPO, 'python');
    const kernelsDir = join(tmp, 'kernels');
    const kernel = renderKernelFiles({
      kernel: { name: 'kdgat-test', displayName: 'KD-GAT (test venv)' },
      environment: { ...environment, activate: activationSnippet(environment, localProfile), lockHash },
      profile: localProfile,
      kernelsDir,
      codePath: code,
    });
    mkdirSync(kernel.dir, { recursive: true });
    for (const [file, text] of Object.entries(kernel.files)) writeFileSync(join(kernel.dir, file), text);

    const cell = [
      'import kdgat, torch_geometric, os, sys',
      "print(os.environ['HPC_ENV_LOCK_HASH'])",
      'print(kdgat.__file__)',
      'print(sys.prefix)',
    ].join('\n');
    const jupyter = (dir: string) => join(tmp, 'jupyter', dir);
    const r = spawnSync(PYTHON, ['-c', DRIVER, kernelsDir, kernel.name, cell, String(TIMEOUT_S)], {
      encoding: 'utf8',
      timeout: (2 * TIMEOUT_S + 30) * 1000,
      env: {
        PATH: '/usr/local/bin:/usr/bin:/bin',
        HOME: tmp,
        LANG: 'C.UTF-8',
        // Jupyter's and IPython's own files (connection files, profile) stay in the temp dir.
        JUPYTER_RUNTIME_DIR: jupyter('runtime'),
        JUPYTER_DATA_DIR: jupyter('data'),
        JUPYTER_CONFIG_DIR: jupyter('config'),
        JUPYTER_PLATFORM_DIRS: '1',
        IPYTHONDIR: jupyter('ipython'),
      },
    });
    expect(r.error, r.stderr).toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
      argv: string[];
      display_name: string;
      error?: string;
      stdout: string;
      stderr: string;
    };
    expect(result.error, result.stderr).toBeUndefined();
    expect(result.display_name).toBe('KD-GAT (test venv)');
    expect(result.argv.slice(0, 2)).toEqual(['bash', join(kernel.dir, 'kernel.sh')]);
    const [printedHash, kdgatFile, prefix] = result.stdout.trim().split('\n');
    expect(printedHash).toBe(lockHash);
    // the code's src/ comes first, before the venv's installed kdgat
    expect(kdgatFile).toBe(join(code, 'src', 'kdgat', '__init__.py'));
    expect(prefix).toBe(VENV);
  });
});
