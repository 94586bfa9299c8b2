// The workspace keeps the dependency arrows of ARCHITECTURE.md: Nx sees exactly these edges, and
// the module-boundary lint rule rejects an import that points the wrong way.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

const repo = resolve(import.meta.dirname, '../../..');

test('nx graph shows the eleven projects with exactly the architecture edges', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-graph-'));
  try {
    const file = join(dir, 'graph.json');
    const r = spawnSync('nx', ['graph', `--file=${file}`], { cwd: repo, encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, `nx graph failed:\n${r.stdout}${r.stderr}`);
    const graph = JSON.parse(readFileSync(file, 'utf8')).graph as {
      dependencies: Record<string, { target: string }[]>;
    };
    const edges = Object.fromEntries(
      Object.entries(graph.dependencies).map(([source, deps]) => [source, deps.map((d) => d.target).sort()]),
    );
    assert.deepEqual(edges, {
      config: [],
      'slurm-templates': ['config'],
      usage: ['config'],
      transport: ['config', 'slurm-templates'],
      schedulers: ['transport'],
      planning: ['config', 'schedulers', 'slurm-templates', 'transport', 'usage'],
      'run-record': ['config', 'planning', 'schedulers', 'transport', 'usage'],
      runs: ['config', 'planning', 'run-record', 'schedulers', 'slurm-templates', 'transport', 'usage'],
      runner: [
        'config',
        'planning',
        'run-record',
        'runs',
        'schedulers',
        'slurm-templates',
        'transport',
        'usage',
      ],
      infra: ['config', 'slurm-templates', 'transport'],
      python: [],
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

function lint(file: string, text: string): { code: number; out: string } {
  writeFileSync(file, text);
  try {
    const r = spawnSync('eslint', ['--no-warn-ignored', file], {
      cwd: repo,
      encoding: 'utf8',
      timeout: 120_000,
    });
    return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
  } finally {
    rmSync(file, { force: true });
  }
}

test('a lib importing an app is a lint error', () => {
  const file = join(repo, 'libs/config/src/__boundary_probe__.ts');
  const r = lint(file, "import '@kdgat/runner';\nexport const probe = 1;\n");
  assert.notEqual(r.code, 0, r.out);
  assert.match(r.out, /@nx\/enforce-module-boundaries/);
});

test('config importing slurm-templates (the wrong way round) is a lint error', () => {
  const file = join(repo, 'libs/config/src/__boundary_probe__.ts');
  const r = lint(file, "import '@kdgat/slurm-templates';\nexport const probe = 1;\n");
  assert.notEqual(r.code, 0, r.out);
  assert.match(r.out, /@nx\/enforce-module-boundaries/);
});

test('a runner library importing the runner app is a lint error', () => {
  const file = join(repo, 'libs/run-record/src/__boundary_probe__.ts');
  const r = lint(file, "import '@kdgat/runner';\nexport const probe = 1;\n");
  assert.notEqual(r.code, 0, r.out);
  assert.match(r.out, /@nx\/enforce-module-boundaries/);
});

test('run-record importing the runs library (the wrong way round) is a lint error', () => {
  const file = join(repo, 'libs/run-record/src/__boundary_probe__.ts');
  const r = lint(file, "import '@kdgat/runs';\nexport const probe = 1;\n");
  assert.notEqual(r.code, 0, r.out);
  assert.match(r.out, /@nx\/enforce-module-boundaries/);
});

test('the runs library importing the runner app is a lint error', () => {
  const file = join(repo, 'libs/runs/src/__boundary_probe__.ts');
  const r = lint(file, "import '@kdgat/runner';\nexport const probe = 1;\n");
  assert.notEqual(r.code, 0, r.out);
  assert.match(r.out, /@nx\/enforce-module-boundaries/);
});

test('slurm-templates importing config (the right way round) lints clean', () => {
  const file = join(repo, 'libs/slurm-templates/src/__boundary_probe__.ts');
  const r = lint(file, "import type {} from '@kdgat/config';\nexport const probe = 1;\n");
  assert.equal(r.code, 0, r.out);
});
