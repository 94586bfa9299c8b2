import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { condaEnv, localProfile, pitzer, venvEnv } from '../fixtures.test-support.ts';
import { goldenFiles } from '../golden-cases.test-support.ts';
import { shellFileLines } from '../shell/shell-files.ts';
import { bashSyntax, makeSandbox, shellcheck, type Sandbox } from '../test-support/sandbox.ts';
import { activationSnippet, renderModuleShell } from './script-sections.ts';

// The environment's shell is src/shell/environment.sh; what TypeScript renders around it is values
// only (each a `hpc_…=` assignment of one shq word, or an array of them) and the call.
const ENVIRONMENT = shellFileLines('environment').join('\n');
const WORD = String.raw`(?:[A-Za-z0-9_./:=@%+,-]+|'[^']*'|\$'(?:[^'\\]|\\.)*')`;
const ASSIGNMENT = new RegExp(`^hpc_[a-z0-9_]+=(?:${WORD}|'')?$`);

/** The rendered lines around environment.sh: `before` from `from` on, `after` up to `until`. */
function around(text: string, from: number, until: (line: string) => boolean) {
  const at = text.indexOf(ENVIRONMENT);
  expect(at, 'environment.sh is included').toBeGreaterThanOrEqual(0);
  expect(text.indexOf(ENVIRONMENT, at + 1), 'environment.sh is included once').toBe(-1);
  const before = text.slice(0, at).split('\n').slice(from, -1);
  const rest = text.slice(at + ENVIRONMENT.length + 1).split('\n');
  const end = rest.findIndex(until);
  return { before, after: end < 0 ? rest : rest.slice(0, end) };
}

describe('the environment section (values, environment.sh, one call)', () => {
  it('in every job script renders only assignments; the job library holds environment.sh once and the call after it', () => {
    const files = goldenFiles();
    const scripts = Object.entries(files).filter(
      ([name]) => name.endsWith('.sh') && !/(stage_data|job_epilog|job-library)\.sh$/.test(name),
    );
    expect(scripts.length).toBeGreaterThanOrEqual(10);
    for (const [name, script] of scripts) {
      expect(script, name).not.toContain(ENVIRONMENT);
      const lines = script.split('\n');
      const header = lines.findIndex((l) => l.startsWith('# The environment:'));
      expect(header, name).toBeGreaterThan(0);
      const end = lines.indexOf('', header);
      const section = lines.slice(header + 1, end);
      // A job with its pipeline's code (a declared pipeline) adds the code dir and its PYTHONPATH
      // entries, an array of words: `hpc_code_paths=(`, one word a line, `)`; an environment with
      // its own site modules adds its name and `hpc_env_modules=(` likewise.
      let before = section;
      for (const arrayName of ['hpc_code_paths', 'hpc_env_modules']) {
        const array = before.indexOf(`${arrayName}=(`);
        if (array < 0) continue;
        const close = before.indexOf(')', array);
        for (const word of before.slice(array + 1, close))
          expect(word, name).toMatch(/^ {2}[A-Za-z0-9_./+-]+$/);
        before = [...before.slice(0, array), ...before.slice(close + 1)];
      }
      const extra = ['hpc_code=', 'hpc_env_name='].filter((v) => before.some((l) => l.startsWith(v)));
      expect(before.length, name).toBe(5 + extra.length);
      for (const line of before) expect(line, name).toMatch(ASSIGNMENT);
    }
    const library = around(files['job-library.sh']!, 0, (l) => l === '');
    expect(library.after).toEqual(['hpc_environment']);
  });

  it('in the login-node script and the activation snippet, likewise', () => {
    const login = around(renderModuleShell(pitzer)!, 0, () => false);
    expect(login.before.filter((l) => !/^hpc_login_modules=\($|^ {2}|^\)$/.test(l))).toEqual([
      'hpc_profile=osc-pitzer',
      'hpc_unavailable_status=69',
      'hpc_lmod_init=/etc/profile.d/lmod.sh',
    ]);
    expect(login.after).toEqual(['hpc_load_login_modules', 'exec "$@"', '']);
    for (const env of [condaEnv, venvEnv]) {
      const snippet = around(activationSnippet(env, pitzer), 0, () => false);
      for (const line of snippet.before) expect(line).toMatch(ASSIGNMENT);
      expect(snippet.after).toEqual(['hpc_activate', '']);
    }
  });
});

describe('activationSnippet (the stack output environment.activate)', () => {
  let sb: Sandbox;
  beforeEach(() => {
    sb = makeSandbox({ stubs: [] }); // no module, no conda: each test provides what it needs
  });
  afterEach(() => sb.cleanup());

  /** Sources the snippet in a fresh bash, as a user would, then prints the shell's options. */
  function source(snippet: string) {
    const file = sb.write('activate.sh', snippet);
    const r = spawnSync('bash', ['-c', 'source "$1" && echo "options: $-"', 'user-shell', file], {
      encoding: 'utf8',
      env: sb.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return { file, ...r };
  }

  it('loads the conda module when conda is not on PATH, then activates the environment', () => {
    // A site's Lmod: `module load` of the conda module puts a conda stub on PATH.
    const condaBin = join(sb.dir, 'conda-module', 'bin');
    mkdirSync(condaBin, { recursive: true });
    writeFileSync(
      join(condaBin, 'conda'),
      '#!/bin/bash\necho \'conda() { printf "%s\\0" "$@" >"$STUB_LOG/conda.$(date +%s%N).argv"; }\'\n',
      { mode: 0o755 },
    );
    const init = sb.write(
      'lmod-init.sh',
      `module() { printf '%s\\0' "$@" >"$STUB_LOG/module.$(date +%s%N).argv"; PATH=${condaBin}:$PATH; }\n`,
    );
    const r = source(activationSnippet(condaEnv, { ...pitzer, modules: { ...pitzer.modules, init } }));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('module')).toEqual([['load', 'miniconda3/24.1.2-py310']]);
    expect(sb.calls('conda')).toEqual([['activate', condaEnv.prefix]]);
    expect(r.stdout).toMatch(/^options: \S*u/);
    expect(bashSyntax([r.file])).toBe('');
    expect(shellcheck([r.file])).toBe('');
  });

  it('stops with status 69 when conda cannot be found', () => {
    const r = source(activationSnippet(condaEnv, { ...pitzer, modules: {} }));
    expect(r.status).toBe(69);
    expect(r.stderr).toBe(
      `kdgat-hpc: conda is not on PATH, so environment ${condaEnv.prefix} cannot be activated\n`,
    );
  });

  /**
   * A site's Lmod as its init defines it: `module` records each call; `load python/*` puts that
   * Python's name where the venv's activate script can see it; `load missing/*` fails as Lmod does.
   */
  function siteLmod(): string {
    return sb.write(
      'lmod-init.sh',
      [
        'module() {',
        `  printf '%s\\0' "$@" >"$STUB_LOG/module.$(date +%s%N).argv"`,
        '  case $2 in',
        '    missing/*) echo "Lmod has detected the following error: The following module(s) are unknown: $2" >&2; return 1 ;;',
        '    python/*) export SITE_PYTHON_MODULE=$2 ;;',
        '  esac',
        '}',
        '',
      ].join('\n'),
    );
  }
  const uvVenv = (prefix: string, modules: string[]) => ({
    name: 'tiny-venv',
    backend: 'venv' as const,
    prefix,
    modules,
  });

  it("loads a venv's own site modules before its activation, so its python is the module's", () => {
    const prefix = join(sb.dir, 'venv');
    sb.write(
      'venv/bin/activate',
      'printf "%s with %s" "$BASH_SOURCE" "${SITE_PYTHON_MODULE:-no python module}" >"$STUB_LOG/venv-activated"\n',
    );
    const snippet = activationSnippet(uvVenv(prefix, ['python/3.12', 'gcc/12.3.0']), {
      ...localProfile,
      modules: { init: siteLmod() },
    });
    // The values, each quoted by the one helper: the name for messages, the modules one a line.
    expect(snippet).toContain('hpc_env_name=tiny-venv\nhpc_env_modules=(\n  python/3.12 gcc/12.3.0\n)\n');
    const r = source(snippet);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('module')).toEqual([
      ['load', 'python/3.12'],
      ['load', 'gcc/12.3.0'],
    ]);
    expect(readFileSync(join(sb.log, 'venv-activated'), 'utf8')).toBe(
      `${join(prefix, 'bin', 'activate')} with python/3.12`,
    );
    expect(bashSyntax([r.file])).toBe('');
    expect(shellcheck([r.file])).toBe('');
  });

  it("stops with status 69 naming the module and the environment when the environment's module cannot be loaded", () => {
    sb.write('venv/bin/activate', 'touch "$STUB_LOG/venv-activated"\n');
    const snippet = activationSnippet(uvVenv(join(sb.dir, 'venv'), ['missing/3.12', 'gcc/12.3.0']), {
      ...pitzer,
      modules: { init: siteLmod() },
    });
    const r = source(snippet);
    expect(r.status).toBe(69);
    expect(r.stderr).toContain('The following module(s) are unknown: missing/3.12');
    expect(r.stderr).toMatch(
      /kdgat-hpc: environment tiny-venv: module load missing\/3\.12 failed on \S+ \(the module system says why above\)\n$/,
    );
    // Nothing after the failing module: not the next one, not the activation.
    expect(sb.calls('module')).toEqual([['load', 'missing/3.12']]);
    expect(existsSync(join(sb.log, 'venv-activated'))).toBe(false);
  });

  it("a conda environment's own modules come after the profile's conda module, before `conda activate`", () => {
    const condaBin = join(sb.dir, 'conda-module', 'bin');
    mkdirSync(condaBin, { recursive: true });
    writeFileSync(
      join(condaBin, 'conda'),
      '#!/bin/bash\necho \'conda() { printf "%s\\0" "$@" >"$STUB_LOG/conda.$(date +%s%N).argv"; }\'\n',
      { mode: 0o755 },
    );
    const init = sb.write(
      'lmod-init.sh',
      `module() { printf '%s\\0' "$@" >"$STUB_LOG/module.$(date +%s%N).argv"; PATH=${condaBin}:$PATH; }\n`,
    );
    const r = source(
      activationSnippet(
        { ...condaEnv, modules: ['gcc/12.3.0'] },
        { ...pitzer, modules: { ...pitzer.modules, init } },
      ),
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(sb.calls('module')).toEqual([
      ['load', 'miniconda3/24.1.2-py310'],
      ['load', 'gcc/12.3.0'],
    ]);
    expect(sb.calls('conda')).toEqual([['activate', condaEnv.prefix]]);
  });

  it('a text without the modules array (an environment that names none) activates under set -u', () => {
    sb.write('venv/bin/activate', 'touch "$STUB_LOG/venv-activated"\n');
    const snippet = activationSnippet({ ...venvEnv, prefix: join(sb.dir, 'venv') }, localProfile);
    expect(snippet).not.toContain('hpc_env_modules=');
    expect(snippet).not.toContain('hpc_env_name=');
    const file = sb.write('activate.sh', snippet);
    const r = spawnSync('bash', ['-c', 'set -euo pipefail; source "$1"; echo activated', 'job', file], {
      encoding: 'utf8',
      env: sb.env(),
    });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('activated\n');
    expect(existsSync(join(sb.log, 'venv-activated'))).toBe(true);
  });

  it('refuses a module name that is not one, naming its field and value', () => {
    expect(() => activationSnippet(uvVenv('/fs/ess/envs/tiny', ['python/3.12', '$(id)']), pitzer)).toThrow(
      /environment\.modules\[1\] = "\$\(id\)"/,
    );
  });

  it("sources a venv's bin/activate", () => {
    const prefix = join(sb.dir, 'venv');
    sb.write('venv/bin/activate', 'printf "%s" "$BASH_SOURCE" >"$STUB_LOG/venv-activated"\n');
    const r = source(activationSnippet({ ...venvEnv, prefix: `${prefix}/` }, localProfile));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(readFileSync(join(sb.log, 'venv-activated'), 'utf8')).toBe(join(prefix, 'bin', 'activate'));
  });
});
