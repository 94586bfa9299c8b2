// The module preamble with the real Lmod where the shell has no `module` yet (a login node whose
// non-interactive shells skip the profile scripts): the profile's Lmod init is what defines it.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { activationSnippet } from '@kdgat/slurm-templates';
import { withModules } from '../../providers/module-shell.ts';
import { makeModuleTree } from './modules.ts';

/** Debian `lmod`'s own bash init (scripts/bootstrap.sh installs the package). */
const LMOD_BASH_INIT = '/usr/share/lmod/lmod/init/bash';

describe('module preamble with the real Lmod', () => {
  const root = mkdtempSync(join(tmpdir(), 'kdgat-lmod-init-'));
  const tree = makeModuleTree(root, '/usr/bin/python3');
  mkdirSync(join(root, 'site'));
  const siteInit = join(root, 'site', 'lmod-init.sh');
  writeFileSync(siteInit, `. ${LMOD_BASH_INIT}\nexport MODULEPATH=${tree.modulePath}\n`);

  /** The script withModules sends, run without the login (`bash -c`) in an empty environment. */
  function runWithout(init: string, modules = tree.modules) {
    const argv = withModules({ profile: 'e2e-site', modules: { ...modules, init } }, [
      'sh',
      '-c',
      'printf "%s\\n" "$LOADEDMODULES" "$CUDA_HOME"; command -v rattler-python',
    ]);
    expect(argv.slice(0, 3)).toEqual(['bash', '-l', '-c']);
    return spawnSync('bash', ['-c', ...argv.slice(3)], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin', HOME: root, LANG: 'C.UTF-8' },
    });
  }

  it('sources the profile init when the shell has no module command, then loads the frontend and CUDA', () => {
    const r = runWithout(siteInit);
    expect(r.status).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      'py-rattler/0.28.0:cuda/12.4.1',
      join(root, 'apps', 'cuda-12.4.1'),
      join(root, 'apps', 'py-rattler', 'bin', 'rattler-python'),
      '',
    ]);
  });

  it('says there is no module command when the profile init is not there', () => {
    const r = runWithout(join(root, 'site', 'missing.sh'));
    expect(r.status).toBe(69);
    expect(r.stderr).toContain(
      'kdgat-hpc: cluster profile e2e-site loads modules, but there is no module command on',
    );
  });

  it("passes on Lmod's own message for an unknown module", () => {
    const r = runWithout(siteInit, { ...tree.modules, cuda: 'cuda/99.9' });
    expect(r.status).toBe(69);
    expect(r.stderr).toMatch(
      /Lmod has detected the following error: +The following module\(s\) are unknown:\s+"cuda\/99\.9"/,
    );
    expect(r.stderr).toContain('module load py-rattler/0.28.0 cuda/99.9 failed on');
    expect(r.stdout).toBe('');
  });

  // The site's Python as a module (OSC's `python/3.12`), which a researcher's uv venv is made from.
  mkdirSync(join(tree.modulePath, 'python'));
  writeFileSync(
    join(tree.modulePath, 'python', '3.12.lua'),
    `whatis("the site's Python 3.12 (stand-in)")\nsetenv("SITE_PYTHON", "3.12")\n`,
  );

  it("loads the environment's own modules after the profile's, for the build", () => {
    const argv = withModules(
      {
        profile: 'e2e-site',
        modules: { ...tree.modules, init: siteInit },
        environmentModules: ['python/3.12'],
      },
      ['sh', '-c', 'printf "%s\\n" "$LOADEDMODULES" "$SITE_PYTHON"'],
    );
    const r = spawnSync('bash', ['-c', ...argv.slice(3)], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin', HOME: root, LANG: 'C.UTF-8' },
    });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('py-rattler/0.28.0:cuda/12.4.1:python/3.12\n3.12\n');
  });

  it("the activation loads them before the venv's activate, and stops with 69 naming an unknown one and the environment", () => {
    const prefix = join(root, 'envs', 'tiny-venv');
    mkdirSync(join(prefix, 'bin'), { recursive: true });
    writeFileSync(join(prefix, 'bin', 'activate'), 'echo "activated with python ${SITE_PYTHON:-none}"\n');
    const profile = {
      name: 'e2e-site',
      clusterName: 'e2e',
      scheduler: 'slurm' as const,
      accountRequired: false,
      gpuDirective: 'gres' as const,
      modules: { init: siteInit },
    };
    /** Sources the environment's `activate` output in a shell without `module`, as a user would. */
    const source = (modules: string[]) => {
      const file = join(root, `activate-${modules.join('-').replace(/\W/g, '_')}.sh`);
      writeFileSync(
        file,
        activationSnippet({ name: 'tiny-venv', backend: 'venv', prefix, modules }, profile),
      );
      return spawnSync('bash', ['-c', 'source "$1"', 'user-shell', file], {
        encoding: 'utf8',
        env: { PATH: '/usr/bin:/bin', HOME: root, LANG: 'C.UTF-8' },
      });
    };
    const ok = source(['python/3.12']);
    expect(ok.stderr).toBe('');
    expect(ok.stdout).toBe('activated with python 3.12\n');
    const unknown = source(['python/9.99']);
    expect(unknown.status).toBe(69);
    expect(unknown.stderr).toMatch(/The following module\(s\) are unknown:\s+"python\/9\.99"/);
    expect(unknown.stderr).toContain('kdgat-hpc: environment tiny-venv: module load python/9.99 failed on');
    expect(unknown.stdout).toBe('');
  });
});
