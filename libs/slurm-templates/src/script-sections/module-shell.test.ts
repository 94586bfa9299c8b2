import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TemplateInputError } from '../quote/errors.ts';
import { localProfile, pitzer } from '../fixtures.test-support.ts';
import { bashSyntax, shellcheck } from '../test-support/sandbox.ts';
import { renderModuleShell } from './script-sections.ts';

/** Runs the preamble as infra does (`bash -c SCRIPT kdgat-modules ARGV…`) in a clean environment. */
function run(script: string, argv: string[], path: string) {
  return spawnSync('bash', ['-c', script, 'kdgat-modules', ...argv], {
    encoding: 'utf8',
    env: { PATH: path, HOME: tmpdir(), LANG: 'C.UTF-8' },
  });
}

/** A directory with a fake `module` command that records its arguments and fails for `missing/*`. */
function fakeModuleCommand(): { bin: string; log: string } {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-module-shell-'));
  const log = join(dir, 'calls');
  writeFileSync(
    join(dir, 'module'),
    `#!/bin/sh\nprintf '%s\\n' "$*" >>'${log}'\ncase "$*" in *missing/*) echo "unknown: $*" >&2; exit 1;; esac\n`,
    { mode: 0o755 },
  );
  return { bin: dir, log };
}

describe('renderModuleShell (commands on a login node after the profile modules)', () => {
  it('is null for a profile without modules', () => {
    expect(renderModuleShell(localProfile)).toBeNull();
  });

  it('loads the conda frontend and CUDA modules, then runs its arguments as given', () => {
    const script = renderModuleShell(pitzer)!;
    const fake = fakeModuleCommand();
    const r = run(script, ['printf', '%s|', "it's", '$HOME', 'a b'], `${fake.bin}:/usr/bin:/bin`);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    // One `module load` of both, the conda frontend's first.
    expect(readFileSync(fake.log, 'utf8')).toBe('load miniconda3/24.1.2-py310 cuda/12.4.1\n');
    expect(r.stdout).toBe("it's|$HOME|a b|");
  });

  it("loads the environment's own modules after the profile's, and alone where the profile has none", () => {
    const fake = fakeModuleCommand();
    const both = renderModuleShell(pitzer, { modules: ['python/3.12', 'gcc/12.3.0'] })!;
    expect(run(both, ['true'], `${fake.bin}:/usr/bin:/bin`).status).toBe(0);
    expect(readFileSync(fake.log, 'utf8')).toBe(
      'load miniconda3/24.1.2-py310 cuda/12.4.1 python/3.12 gcc/12.3.0\n',
    );
    // A profile without modules (the venv's site names only the Python module): the usual Lmod init.
    const own = renderModuleShell(localProfile, { modules: ['python/3.12'] })!;
    expect(own).toContain('hpc_lmod_init=/etc/profile.d/lmod.sh\n');
    const fakeOwn = fakeModuleCommand();
    const r = run(own, ['printf', 'built'], `${fakeOwn.bin}:/usr/bin:/bin`);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('built');
    expect(readFileSync(fakeOwn.log, 'utf8')).toBe('load python/3.12\n');
    expect(renderModuleShell(localProfile, { modules: [] })).toBeNull();
    expect(() => renderModuleShell(localProfile, { modules: ['-rf'] })).toThrow(
      /environment\.modules\[0\] = "-rf"/,
    );
  });

  it('stops with status 69 and the module system message when a module is missing', () => {
    const fake = fakeModuleCommand();
    const script = renderModuleShell({ ...pitzer, modules: { ...pitzer.modules, cuda: 'missing/1' } })!;
    const r = run(script, ['touch', join(fake.bin, 'ran')], `${fake.bin}:/usr/bin:/bin`);
    expect(r.status).toBe(69);
    expect(r.stderr).toContain('unknown: load miniconda3/24.1.2-py310 missing/1');
    expect(r.stderr).toContain(
      'kdgat-hpc: cluster profile osc-pitzer: module load miniconda3/24.1.2-py310 missing/1 failed on',
    );
    expect(spawnSync('test', ['-e', join(fake.bin, 'ran')]).status).not.toBe(0);
  });

  it('sources the profile Lmod init when there is no module command, and says so when that fails', () => {
    const fake = fakeModuleCommand();
    const init = join(fake.bin, 'site-lmod-init.sh');
    writeFileSync(init, `module() { printf '%s\\n' "$*" >>'${fake.log}'; }\n`);
    const withInit = renderModuleShell({ ...pitzer, modules: { ...pitzer.modules, init } })!;
    const ok = run(withInit, ['true'], '/usr/bin:/bin');
    expect(ok.status).toBe(0);
    const missing = renderModuleShell({
      ...pitzer,
      modules: { ...pitzer.modules, init: join(fake.bin, 'none') },
    })!;
    const r = run(missing, ['true'], '/usr/bin:/bin');
    expect(r.status).toBe(69);
    expect(r.stderr).toContain('cluster profile osc-pitzer loads modules, but there is no module command on');
  });

  it('parses, passes shellcheck, and refuses a module name that could be an option or an init path with shell characters', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kdgat-module-shell-'));
    const file = join(dir, 'module-shell.sh');
    writeFileSync(
      file,
      renderModuleShell({ ...pitzer, modules: { ...pitzer.modules, init: '/apps/lmod/lmod/init/bash' } })!,
    );
    expect(bashSyntax([file])).toBe('');
    expect(shellcheck([file])).toBe('');
    expect(() => renderModuleShell({ ...pitzer, modules: { conda: '-rf' } })).toThrow(TemplateInputError);
    expect(() => renderModuleShell({ ...pitzer, modules: { conda: '-rf' } })).toThrow(
      /profile\.modules\.conda = "-rf"/,
    );
    // The init path follows the same rule as validation (SCRIPT_VALUES.lmodInit): no shell characters.
    expect(() =>
      renderModuleShell({ ...pitzer, modules: { ...pitzer.modules, init: "/x/it's $(id)" } }),
    ).toThrow(/profile\.modules\.init = "\/x\/it's \$\(id\)"/);
  });
});
