// The module preamble with the real Lmod where the shell has no `module` yet (a login node whose
// non-interactive shells skip the profile scripts): the profile's Lmod init is what defines it.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
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
});
