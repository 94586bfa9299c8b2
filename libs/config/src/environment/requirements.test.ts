import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { sitePackages } from './gpu-layers.ts';
import { linuxX86_64 } from './markers.ts';
import { requirementsPins, requirementsSources } from './requirements.ts';
import { pipRequirements } from './render.ts';
import { useWorkspace } from '../workspace/workspace.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EnvironmentSpecSchema } from './schema.ts';
import { LockfileError, pipelinePins } from './uv-lock.ts';

const FIXTURE = 'libs/config/src/environment/fixtures/requirements-pinned.txt';

describe('a pinned requirements file as a pipeline lock', () => {
  it("installs its pins for the site's platform: markers evaluated, hashes and comments ignored", () => {
    const env = EnvironmentSpecSchema.parse({
      name: 'theirs',
      backend: 'venv',
      python: '3.11',
      pipelinePins: true,
      pipelineLock: { file: FIXTURE },
    });
    expect(sitePackages(env)).toEqual([
      { name: 'lightning', version: '2.6.6' },
      { name: 'numpy', version: '2.3.5' },
      { name: 'torch-geometric', version: '2.7.0' },
    ]);
  });

  it("reads what `uv export` writes from a project's uv.lock as that lock's own pins", () => {
    const project = new URL('../../../../examples/pipelines/tiny-lightning/', import.meta.url);
    const exported = execFileSync(
      'uv',
      ['export', '--frozen', '--no-dev', '--no-emit-project', '--format', 'requirements-txt'],
      // No colour: under nx (FORCE_COLOR) uv would colour its header comment.
      {
        cwd: project,
        encoding: 'utf8',
        env: { ...withoutColour(process.env), UV_PYTHON_DOWNLOADS: 'never', NO_COLOR: '1' },
      },
    );
    const lock = readFileSync(new URL('uv.lock', project), 'utf8');
    const byName = (pins: { name: string }[]) => [...pins].sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const python of ['3.11', '3.12']) {
      const env = linuxX86_64(python);
      expect(byName(requirementsPins(exported, env, 'exported.txt'))).toEqual(
        byName(pipelinePins(lock, env, 'tiny-lightning')),
      );
    }
  });

  it.each([
    ['an unpinned requirement', 'numpy>=2\n', /req\.txt:1: numpy>=2 is not pinned: expected name==version/],
    [
      'an option',
      'torch==2.9.1\n-r other.txt\n',
      /req\.txt:2: -r other\.txt: options other than --index-url, --extra-index-url and --find-links are not read/,
    ],
    [
      'a trusted host',
      '--trusted-host example.org\na==1\n',
      /req\.txt:1: --trusted-host example\.org: options other than/,
    ],
    ['a package pinned twice', 'a==1\nA==2\n', /req\.txt:2: a is pinned twice \(1 and 2\)/],
  ])('refuses %s with its line', (_what, text, message) => {
    expect(() => requirementsPins(text, linuxX86_64('3.11'), 'req.txt')).toThrow(LockfileError);
    expect(() => requirementsPins(text, linuxX86_64('3.11'), 'req.txt')).toThrow(message);
  });

  it("keeps the file's package sources for the site's pip, in its order, and refuses one that is not a URL", () => {
    const text = [
      '--index-url https://pypi.org/simple',
      'torch==2.8.0',
      '-f https://data.pyg.org/whl/torch-2.8.0+cu126.html',
      '--extra-index-url=https://download.pytorch.org/whl/cu126',
      'torch-scatter==2.1.2+pt28cu126',
      '',
    ].join('\n');
    expect(requirementsSources(text, 'req.txt')).toEqual([
      '--index-url https://pypi.org/simple',
      '--find-links https://data.pyg.org/whl/torch-2.8.0+cu126.html',
      '--extra-index-url https://download.pytorch.org/whl/cu126',
    ]);
    expect(requirementsPins(text, linuxX86_64('3.11'), 'req.txt').map((p) => p.name)).toEqual([
      'torch',
      'torch-scatter',
    ]);
    expect(() => requirementsSources('--find-links ../wheels\n', 'req.txt')).toThrow(
      /req\.txt:1: --find-links \.\.\/wheels: expected an http\(s\):\/\/ or file:\/\/ URL/,
    );
    // The site build gets them first, then the pins: one requirements file pip reads as it is.
    const root = mkdtempSync(join(tmpdir(), 'kdgat-req-'));
    try {
      writeFileSync(join(root, 'requirements.txt'), text);
      useWorkspace({ root } as Parameters<typeof useWorkspace>[0]);
      const env = EnvironmentSpecSchema.parse({
        name: 'pyg',
        backend: 'venv',
        python: '3.11',
        pipelinePins: true,
        pipelineLock: { file: 'requirements.txt' },
      });
      expect(pipRequirements(env)).toEqual([
        '--index-url https://pypi.org/simple',
        '--find-links https://data.pyg.org/whl/torch-2.8.0+cu126.html',
        '--extra-index-url https://download.pytorch.org/whl/cu126',
        'torch-scatter==2.1.2+pt28cu126',
        'torch==2.8.0',
      ]);
    } finally {
      useWorkspace(undefined);
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('needs the project of a uv.lock, not of a requirements file', () => {
    const lock = (file: string) =>
      EnvironmentSpecSchema.safeParse({ name: 'x', backend: 'venv', python: '3.11', pipelineLock: { file } });
    expect(lock('req/requirements.txt').success).toBe(true);
    const uv = lock('theirs/uv.lock');
    expect(uv.success).toBe(false);
    expect(uv.error?.issues[0]?.message).toMatch(/a uv\.lock needs project/);
    expect(lock('../outside/requirements.txt').success).toBe(false);
  });
});

function withoutColour(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { FORCE_COLOR: _force, CLICOLOR_FORCE: _clicolor, ...rest } = env;
  return rest;
}
