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

const REPO = new URL('../../../../', import.meta.url).pathname.replace(/\/$/, '');
const VENV = join(REPO, 'python', '.venv');
const PYTHON = join(VENV, 'bin', 'python');
const TIMEOUT_S = 120;

// Starts the kernel by name from the kernels dir alone, runs one cell, prints its stdout and stderr
// streams (and its error, if any) as JSON, and always shuts the kernel down. Every wait is bounded.
const DRIVER = String.raw`import json
import sys

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

kernels_dir, name, code, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
km = KernelManager(kernel_name=name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels_dir]))
km.start_kernel()
result = {"argv": km.kernel_spec.argv, "display_name": km.kernel_spec.display_name}
try:
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=timeout)
    msg_id = kc.execute(code)
    out = {"stdout": [], "stderr": []}
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "stream":
            out[msg["content"]["name"]].append(msg["content"]["text"])
        elif kind == "error":
            result["error"] = msg["content"]["ename"] + ": " + msg["content"]["evalue"]
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            break
    result.update({stream: "".join(texts) for stream, texts in out.items()})
    kc.stop_channels()
finally:
    km.shutdown_kernel(now=True)
print(json.dumps(result))
`;

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
      "print(os.environ['KDGAT_ENV_LOCK_HASH'])",
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
