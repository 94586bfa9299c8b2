import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { condaEnv, localProfile, pitzer } from '../fixtures.test-support.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { activationSnippet } from '../script-sections/script-sections.ts';
import { shellFileLines } from '../shell/shell-files.ts';
import { bashSyntax, makeSandbox, shellcheck, type Sandbox } from '../test-support/sandbox.ts';
import { kernelDirFor, renderKernelFiles, type KernelFilesInput } from './kernel.ts';

const KERNELS = '/users/PAS1266/jdoe/.local/share/jupyter/kernels';
const LOCK = 'a'.repeat(64);
const pitzerGpu: KernelFilesInput = {
  kernel: { displayName: 'KD-GAT (gnn-rapids, CUDA 12)', modules: ['cuda/12.4.1'] },
  environment: {
    name: condaEnv.name,
    prefix: condaEnv.prefix!,
    activate: activationSnippet(condaEnv, pitzer),
    lockHash: LOCK,
  },
  profile: pitzer,
  kernelsDir: KERNELS,
  codePath: '/fs/scratch/PAS1266/kd-gat/code/current',
};

describe('renderKernelFiles', () => {
  it('kernel.json: runs kernel.sh of its directory with the connection file, names the environment and its lock', () => {
    const k = renderKernelFiles(pitzerGpu);
    expect(k.name).toBe('gnn-rapids');
    expect(k.dir).toBe(`${KERNELS}/gnn-rapids`);
    expect(k.dir).toBe(kernelDirFor(KERNELS, 'gnn-rapids'));
    expect(JSON.parse(k.files['kernel.json'])).toEqual({
      argv: ['bash', `${KERNELS}/gnn-rapids/kernel.sh`, '{connection_file}'],
      display_name: 'KD-GAT (gnn-rapids, CUDA 12)',
      language: 'python',
      interrupt_mode: 'signal',
      env: { HPC_ENV_LOCK_HASH: LOCK },
      metadata: {
        debugger: true,
        'kdgat-hpc': {
          environment: 'gnn-rapids',
          prefix: condaEnv.prefix,
          lockHash: LOCK,
          code: '/fs/scratch/PAS1266/kd-gat/code/current',
        },
      },
    });
    // one key a line: a preview diffs it line by line
    expect(k.files['kernel.json'].split('\n').length).toBeGreaterThan(15);
  });

  it("kernel.sh: the kernel's values, the activation snippet as the stack outputs it, src/shell/kernel.sh, the call", () => {
    const script = renderKernelFiles(pitzerGpu).files['kernel.sh'];
    const activate = pitzerGpu.environment.activate.replace(/\n$/, '');
    const kernelShell = shellFileLines('kernel').join('\n');
    expect(script.startsWith('#!/bin/bash\n')).toBe(true);
    expect(script).toContain(`\nset -euo pipefail
hpc_kernel_name=gnn-rapids
hpc_kernel_modules=(
  cuda/12.4.1
)
hpc_kernel_code=/fs/scratch/PAS1266/kd-gat/code/current
export HPC_ENV_LOCK_HASH=${LOCK}
`);
    const at = script.indexOf(activate);
    expect(at).toBeGreaterThan(0);
    // the modules need `module`: the profile's Lmod init, after the activation's own value
    expect(script.indexOf('hpc_lmod_init=/etc/profile.d/lmod.sh', at + activate.length)).toBeGreaterThan(0);
    expect(script.endsWith(`${kernelShell}\nhpc_start_kernel "$1"\n`)).toBe(true);
  });

  it('defaults: no modules, no Lmod init; a declared name and code win over the environment and the snapshot link', () => {
    const k = renderKernelFiles({
      ...pitzerGpu,
      kernel: { name: 'kdgat-dev', displayName: 'KD-GAT dev', code: '/users/PAS1266/jdoe/kd-gat/python/' },
    });
    expect(k.dir).toBe(`${KERNELS}/kdgat-dev`);
    expect(k.files['kernel.sh']).toContain(
      '\nhpc_kernel_modules=()\nhpc_kernel_code=/users/PAS1266/jdoe/kd-gat/python\n',
    );
    const afterActivation = k.files['kernel.sh'].slice(k.files['kernel.sh'].indexOf('# ---- the kernel'));
    expect(afterActivation).not.toContain('hpc_lmod_init=');
    const none = renderKernelFiles({ ...pitzerGpu, codePath: undefined, kernel: { displayName: 'K' } });
    expect(none.files['kernel.sh']).toContain("\nhpc_kernel_code=''\n");
    expect(JSON.parse(none.files['kernel.json']).metadata['kdgat-hpc'].code).toBeNull();
  });

  it('refuses what cannot be a kernel, naming the field', () => {
    const refused = (patch: Partial<KernelFilesInput>) => {
      try {
        renderKernelFiles({ ...pitzerGpu, ...patch });
      } catch (e) {
        expect(e).toBeInstanceOf(TemplateInputError);
        return (e as TemplateInputError).field;
      }
      throw new Error('rendered');
    };
    expect(refused({ kernel: { displayName: 'K', name: '../up' } })).toBe('kernel.name');
    expect(refused({ kernel: { displayName: 'K', modules: ['ok/1', 'x;y'] } })).toBe('kernel.modules[1]');
    expect(refused({ kernel: { displayName: 'K', code: 'relative' } })).toBe('kernel.code');
    expect(refused({ kernel: { displayName: '' } })).toBe('kernel.displayName');
    expect(refused({ kernelsDir: '~/.local/share/jupyter/kernels' })).toBe('kernelsDir');
    expect(refused({ environment: { ...pitzerGpu.environment, lockHash: '' } })).toBe('environment.lockHash');
    expect(refused({ environment: { ...pitzerGpu.environment, activate: 'source x' } })).toBe(
      'environment.activate',
    );
  });
});

describe('kernel.sh, run by bash as Jupyter runs it', () => {
  let sb: Sandbox;
  beforeEach(() => {
    sb = makeSandbox({ stubs: [] });
  });
  afterEach(() => sb.cleanup());

  /**
   * A venv whose activate puts a python stub first on PATH (it records argv, PYTHONPATH and the lock
   * hash), and a site Lmod whose `module load` puts another python first: the kernel must keep the
   * environment's.
   */
  function site(code: string, environmentModules: string[] = []) {
    const prefix = join(sb.dir, 'envs', 'cpu-local');
    sb.write(
      'envs/cpu-local/bin/python',
      `#!/bin/bash
printf '%s\\0' "$@" >"$STUB_LOG/python.$(date +%s%N).argv"
printf '%s\\n%s\\n' "$PYTHONPATH" "$HPC_ENV_LOCK_HASH" >"$STUB_LOG/python.env"
`,
      0o755,
    );
    sb.write('envs/cpu-local/bin/activate', `PATH=${prefix}/bin:$PATH\n`);
    sb.write('module-python/python', '#!/bin/bash\necho "the module\'s python ran" >&2; exit 9\n', 0o755);
    const init = sb.write(
      'lmod-init.sh',
      `module() { printf '%s\\0' "$@" >"$STUB_LOG/module.$(date +%s%N).argv"; PATH=${sb.dir}/module-python:$PATH; }\n`,
    );
    const profile = { ...localProfile, modules: { init } };
    const environment = { name: 'cpu-local', backend: 'venv' as const, prefix, modules: environmentModules };
    return renderKernelFiles({
      kernel: { displayName: 'KD-GAT (cpu)', modules: ['cuda/12.4.1', 'git/2.39'] },
      environment: { ...environment, activate: activationSnippet(environment, profile), lockHash: LOCK },
      profile,
      kernelsDir: join(sb.dir, 'kernels'),
      codePath: code,
    });
  }

  function run(kernel: ReturnType<typeof site>) {
    for (const [file, text] of Object.entries(kernel.files))
      sb.write(join('kernels', kernel.name, file), text);
    const script = join(kernel.dir, 'kernel.sh');
    const r = spawnSync('bash', [script, join(sb.tmp, 'kernel-1.json')], {
      encoding: 'utf8',
      env: sb.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return { script, ...r };
  }

  it("activates the environment, loads the modules, puts the code first and execs the environment's ipykernel", () => {
    const code = join(sb.dir, 'code', 'current');
    mkdirSync(join(code, 'src', 'kdgat'), { recursive: true });
    const k = site(code);
    const r = run(k);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('module')).toEqual([['load', 'cuda/12.4.1', 'git/2.39']]);
    expect(sb.calls('python')).toEqual([['-m', 'ipykernel_launcher', '-f', join(sb.tmp, 'kernel-1.json')]]);
    expect(readFileSync(join(sb.log, 'python.env'), 'utf8')).toBe(`${code}/src\n${LOCK}\n`);
    expect(bashSyntax([r.script])).toBe('');
    expect(shellcheck([r.script])).toBe('');
  });

  it("an environment's own site modules load with its activation, before the kernel's, and its python still runs", () => {
    const code = join(sb.dir, 'code', 'current');
    mkdirSync(join(code, 'src', 'kdgat'), { recursive: true });
    const r = run(site(code, ['python/3.12']));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('module')).toEqual([
      ['load', 'python/3.12'],
      ['load', 'cuda/12.4.1', 'git/2.39'],
    ]);
    expect(sb.calls('python')).toEqual([['-m', 'ipykernel_launcher', '-f', join(sb.tmp, 'kernel-1.json')]]);
  });

  it('stops with status 69 and says why when the code is not on the site', () => {
    const k = site(join(sb.dir, 'code', 'current'));
    const r = run(k);
    expect(r.status).toBe(69);
    expect(r.stderr).toMatch(
      /^kdgat-hpc kernel cpu-local: .*\/code\/current\/src is missing on .*: ship the code with a run, or declare the kernel's code\n$/,
    );
    expect(sb.calls('python')).toEqual([]);
  });

  it('delivers hostile paths and names as data: the script parses, passes shellcheck and creates nothing', () => {
    const hostile = `${sb.dir}/code $(touch ${sb.canary}) \`touch ${sb.canary}\` '"\n;touch ${sb.canary}`;
    mkdirSync(join(hostile, 'src'), { recursive: true });
    const kernel = site(hostile);
    const hostileJson = renderKernelFiles({
      ...pitzerGpu,
      kernel: { displayName: `"}\n$(touch ${sb.canary}) \u202e`, modules: [] },
    });
    expect(JSON.parse(hostileJson.files['kernel.json']).display_name).toBe(
      `"}\n$(touch ${sb.canary}) \u202e`,
    );
    const r = run(kernel);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(readFileSync(join(sb.log, 'python.env'), 'utf8')).toBe(`${hostile}/src\n${LOCK}\n`);
    expect(existsSync(sb.canary)).toBe(false);
    expect(bashSyntax([r.script])).toBe('');
    expect(shellcheck([r.script])).toBe('');
  });
});
