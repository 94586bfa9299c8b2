import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { EnvironmentSpecSchema } from '../environment/schema.ts';
import { SpecValidationError } from '../errors.ts';
import { detectProject, initWorkspace, InitError, TODO } from './init.ts';
import {
  WORKSPACE_FILE,
  WORKSPACE_VARIABLE,
  WorkspaceError,
  ensureHpcDir,
  resolveWorkspace,
  stackFileOf,
} from './workspace.ts';

const REPO = new URL('../../../../', import.meta.url).pathname.replace(/\/$/, '');
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kdgat-workspace-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('a workspace is found as git and Nx find their roots', () => {
  it('the first kdgat-hpc.yaml at or above the current directory; its stacks and state inside it', () => {
    writeFileSync(join(dir, WORKSPACE_FILE), 'stacks: cluster/stacks\n');
    mkdirSync(join(dir, 'src', 'deep'), { recursive: true });
    const ws = resolveWorkspace({ cwd: join(dir, 'src', 'deep'), env: {} });
    expect(ws.root).toBe(dir);
    expect(ws.foundBy).toBe('found');
    expect(stackFileOf(ws, 'osc')).toBe(join(dir, 'cluster', 'stacks', 'osc.yaml'));
    expect(ws.stateDir).toBe(join(dir, '.hpc', 'pulumi-state'));
  });

  it('--workspace wins over the variable, the variable over the current directory', () => {
    const a = join(dir, 'a');
    const b = join(dir, 'b');
    for (const d of [a, b]) {
      mkdirSync(d);
      writeFileSync(join(d, WORKSPACE_FILE), '');
    }
    expect(resolveWorkspace({ explicit: a, env: { [WORKSPACE_VARIABLE]: b }, cwd: b }).root).toBe(a);
    expect(resolveWorkspace({ env: { [WORKSPACE_VARIABLE]: b }, cwd: a }).root).toBe(b);
  });

  it('without one: the fallback (the checkout, a workspace itself), else an error saying how to make one', () => {
    expect(resolveWorkspace({ cwd: dir, env: {}, fallback: REPO }).foundBy).toBe('default');
    expect(() => resolveWorkspace({ cwd: dir, env: {} })).toThrow(
      /no kdgat-hpc.yaml in .* or above: make one with `kdgat-runner init`/,
    );
    expect(() => resolveWorkspace({ explicit: dir, env: {}, fallback: REPO })).toThrow(WorkspaceError);
  });

  it('refuses a field it does not know and a folder outside the workspace, naming field and value', () => {
    writeFileSync(join(dir, WORKSPACE_FILE), 'stacks: ../elsewhere\nstak: x\n');
    let err: unknown;
    try {
      resolveWorkspace({ cwd: dir, env: {} });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SpecValidationError);
    expect(String(err)).toMatch(/stacks: a folder inside the workspace.*found "\.\.\/elsewhere"/);
    expect(String(err)).toMatch(/stak/);
  });

  it("the runner's .hpc/ ignores itself: nothing of it is ever committed, the researcher's .gitignore untouched", () => {
    writeFileSync(join(dir, WORKSPACE_FILE), '');
    ensureHpcDir(resolveWorkspace({ cwd: dir, env: {} }));
    expect(readFileSync(join(dir, '.hpc', '.gitignore'), 'utf8')).toMatch(/^\*$/m);
  });

  it("this checkout's own stacks are a workspace of the same shape", () => {
    const ws = resolveWorkspace({ cwd: REPO, env: {} });
    expect(ws.root).toBe(REPO);
    expect(readFileSync(stackFileOf(ws, 'local'), 'utf8')).toMatch(/kdgat-hpc:cluster: local/);
  });
});

describe('runner init: a starting workspace for an existing repository', () => {
  const project = () => {
    const root = join(dir, 'repo');
    cpSync(join(REPO, 'examples', 'pipelines', 'tiny-lightning'), root, { recursive: true });
    return root;
  };

  it('reads the name, Python, lock, CLI module and its words, Lightning, its logger and checkpoints', () => {
    const d = detectProject(project());
    expect(d).toMatchObject({
      name: 'tiny-lightning',
      python: '3.11',
      lock: 'uv.lock',
      cliModule: 'tiny_lightning.cli',
      stagePositional: true,
      overrides: 'hydra',
      outputFlag: '--output-dir',
      lightning: true,
      csvLogger: { name: 'csv', versioned: false },
      checkpointDir: 'checkpoints',
      metricsFile: 'metrics.json',
      pythonPath: ['src'],
    });
    expect(d.choices.scale).toEqual(['small', 'large']);
  });

  it('a -O override CLI, a versioned CSVLogger and a raw-data variable are read as such', () => {
    const root = join(dir, 'kd');
    mkdirSync(join(root, 'kdpkg', 'pipeline'), { recursive: true });
    writeFileSync(join(root, 'pyproject.toml'), '[project]\nname = "kdpkg"\nrequires-python = ">=3.12"\n');
    writeFileSync(join(root, 'requirements.txt'), 'torch==2.9.1\n');
    writeFileSync(
      join(root, 'kdpkg', 'pipeline', 'cli.py'),
      [
        'import argparse, os',
        'from lightning.pytorch.loggers import CSVLogger',
        'p = argparse.ArgumentParser()',
        'p.add_argument("stage", choices=["autoencoder", "curriculum", "distill"])',
        'p.add_argument("--model", choices=["vgae", "gat"])',
        'p.add_argument("--dataset")',
        'p.add_argument("-O", nargs=2, action="append")',
        'root = os.environ["KD_GAT_DATA_ROOT"]',
        'logger = CSVLogger("out", name="logs")',
        '',
      ].join('\n'),
    );
    const d = detectProject(root);
    expect(d).toMatchObject({
      cliModule: 'kdpkg.pipeline.cli',
      overrides: 'dash-O',
      requirements: 'requirements.txt',
      rawDataVariable: 'KD_GAT_DATA_ROOT',
      csvLogger: { name: 'logs', versioned: true },
      python: '3.12',
    });
    expect(d.choices.stage).toEqual(['autoencoder', 'curriculum', 'distill']);
    const r = initWorkspace(root);
    const pipeline = readFileSync(join(root, 'hpc', 'kdpkg.pipeline.yaml'), 'utf8');
    expect(pipeline).toMatch(/"history":"logs\/version_\*\/metrics.csv"/);
    expect(pipeline).toMatch(/rawData: \{ variable: KD_GAT_DATA_ROOT, points: root \}/);
    // The scale it cannot know, and where the CLI writes, are left as TODO lines.
    expect(pipeline).toMatch(new RegExp(`${TODO.replace(/[()]/g, '\\$&')}: the scales your CLI accepts`));
    expect(r.files.find((f) => f.path === 'hpc/kdpkg.pipeline.yaml')!.todos).toBeGreaterThan(0);
  });

  it("the environment file's commented modules line is the field itself: uncommented, it parses", () => {
    const root = project();
    initWorkspace(root);
    const text = readFileSync(join(root, 'hpc', 'tiny-lightning.environment.yaml'), 'utf8');
    expect(text).toMatch(/^# modules: \[python\/3\.12\]$/m);
    const parse = (t: string) => EnvironmentSpecSchema.parse(parseYaml(t));
    expect(parse(text).modules).toEqual([]);
    expect(parse(text.replace(/^# (modules: .*)$/m, '$1')).modules).toEqual(['python/3.12']);
  });

  it('writes nothing over what exists, and nothing at all then', () => {
    const root = project();
    mkdirSync(join(root, 'stacks'));
    writeFileSync(join(root, 'stacks', 'local.yaml'), 'mine\n');
    expect(() => initWorkspace(root)).toThrow(InitError);
    expect(() => initWorkspace(root)).toThrow(/stacks\/local.yaml already there/);
    expect(readFileSync(join(root, 'stacks', 'local.yaml'), 'utf8')).toBe('mine\n');
    expect(() => readFileSync(join(root, WORKSPACE_FILE))).toThrow();
  });
});
