import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
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
      // entries, an array of words: `hpc_code_paths=(`, one word a line, `)`.
      const array = section.indexOf('hpc_code_paths=(');
      const before =
        array < 0 ? section : [...section.slice(0, array), ...section.slice(section.indexOf(')', array) + 1)];
      if (array >= 0)
        for (const word of section.slice(array + 1, section.indexOf(')', array)))
          expect(word, name).toMatch(/^ {2}[A-Za-z0-9_./-]+$/);
      expect(before.length, name).toBe(array < 0 ? 5 : 6);
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

  it("sources a venv's bin/activate", () => {
    const prefix = join(sb.dir, 'venv');
    sb.write('venv/bin/activate', 'printf "%s" "$BASH_SOURCE" >"$STUB_LOG/venv-activated"\n');
    const r = source(activationSnippet({ ...venvEnv, prefix: `${prefix}/` }, localProfile));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(readFileSync(join(sb.log, 'venv-activated'), 'utf8')).toBe(join(prefix, 'bin', 'activate'));
  });
});
