// The site environments' pip part: the pipeline's pins read from python/uv.lock, the GPU layers'
// locks (python/gpu/), and the rules that tie a layer to its Python, its CUDA and the cluster's GPUs.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { clusterPresets } from '../cluster/presets.ts';
import { SpecValidationError } from '../errors.ts';
import { loadExperimentSpec } from '../load/load.ts';
import { siteFromStackConfig } from '../site/stack-config.ts';
import { PITZER_SPEC } from '../test-support/specs.ts';
import {
  cudaMajorsOf,
  dependencyMismatches,
  GPU_LAYER_NAMES,
  GPU_LAYERS,
  gpuLayerPins,
  pipelinePinsFor,
  repositorySources,
  sitePackages,
  stalePins,
  type PipelineSources,
} from './gpu-layers.ts';
import { evaluateMarker, linuxX86_64 } from './markers.ts';
import { environmentPresets } from './presets.ts';
import { pipRequirements, renderEnvironmentYml } from './render.ts';
import { cudaOf, environmentClusterProblems, environmentProblems, rapidsLine } from './rules.ts';
import { EnvironmentSpecSchema, type EnvironmentSpec } from './schema.ts';
import { parseToml, TomlError } from './toml.ts';
import { LockfileError, pipelinePins, projectDependencies } from './uv-lock.ts';

const repoFile = (path: string) => readFileSync(new URL(`../../../../${path}`, import.meta.url), 'utf8');
const UV_LOCK = repoFile('python/uv.lock');
const PYPROJECT = repoFile('python/pyproject.toml');
const PIPELINE_DEPENDENCIES = projectDependencies(PYPROJECT);

/** python/uv.lock with one package's version changed (its [[package]] entry and nothing else). */
function bump(lock: string, name: string, from: string, to: string): string {
  const entry = `name = "${name}"\nversion = "${from}"\n`;
  expect(lock).toContain(entry);
  return lock.replace(entry, `name = "${name}"\nversion = "${to}"\n`);
}
const withUvLock = (uvLock: string): PipelineSources => ({ uvLock, layerLock: repositorySources.layerLock });
const layered = Object.values(environmentPresets).filter(
  (e): e is EnvironmentSpec & { backend: 'conda' } => e.backend === 'conda' && e.gpuLayer !== undefined,
);
const conda = (extra: Record<string, unknown>): EnvironmentSpec =>
  EnvironmentSpecSchema.parse({
    name: 'x',
    backend: 'conda',
    channels: ['conda-forge'],
    cudaVersion: '12.8',
    gpuLayer: 'cuda12',
    dependencies: ['python=3.12', 'cuda-version=12.8', 'pip'],
    ...extra,
  });
const messages = (env: EnvironmentSpec) =>
  environmentProblems(env).map((p) => `${p.path.join('.')}: ${p.message}`);

describe('the TOML of uv.lock and pyproject.toml', () => {
  it('reads tables, arrays of tables, inline tables, multi-line arrays, comments and escapes', () => {
    const doc = parseToml(
      [
        'version = 1 # a comment',
        '[[package]]',
        'name = "a"',
        'deps = [',
        '    { name = "b", extra = ["http"], marker = "sys_platform == \'linux\'" },',
        ']',
        '[package.optional-dependencies]',
        "http = [{ name = 'c' }]",
        '[[package]]',
        'name = "d\\u00e9"',
        '[tool.x]',
        'ok = true',
      ].join('\n'),
    );
    expect(doc).toEqual({
      version: 1,
      package: [
        {
          name: 'a',
          deps: [{ name: 'b', extra: ['http'], marker: "sys_platform == 'linux'" }],
          'optional-dependencies': { http: [{ name: 'c' }] },
        },
        { name: 'dé' },
      ],
      tool: { x: { ok: true } },
    });
  });
  it('refuses what it does not read, with the line', () => {
    expect(() => parseToml('a = 1\nb = """x"""\n', 'f.toml')).toThrow(
      new TomlError('f.toml', 2, 'multi-line strings are not supported'),
    );
    expect(() => parseToml('a = 1\na = 2\n', 'f.toml')).toThrow('f.toml:2: key "a" is defined twice');
    expect(() => parseToml('a = 1979-05-27\n', 'f.toml')).toThrow(/f.toml:1: unsupported value/);
  });
});

describe('PEP 508 markers', () => {
  const linux312 = linuxX86_64('3.12');
  it.each([
    ["platform_machine == 'x86_64' and sys_platform == 'linux'", true],
    ["python_full_version < '3.12'", false],
    ["python_full_version >= '3.12'", true],
    ["python_version == '3.12.*'", true],
    ["sys_platform == 'win32' or (python_version >= '3.10' and 'linux' in sys_platform)", true],
    ["sys_platform != 'emscripten' and sys_platform != 'win32'", true],
    ["platform_machine == 'aarch64'", false],
    ["python_version ~= '3.11'", true],
    ['', true],
  ])('%s -> %s on linux x86_64, CPython 3.12', (marker, holds) =>
    expect(evaluateMarker(marker, linux312)).toBe(holds),
  );
  it('refuses an unknown variable, naming it', () => {
    expect(() => evaluateMarker("python_implementation == 'x'", linux312)).toThrow(
      'unknown variable python_implementation',
    );
  });
});

describe("the pipeline's pins, read from python/uv.lock", () => {
  it('are the runtime closure `uv export` prints, for linux x86_64 and each Python a site uses', () => {
    const exported = execFileSync(
      'uv',
      [
        'export',
        '--frozen',
        '--no-hashes',
        '--no-dev',
        '--no-emit-project',
        '--no-header',
        '--no-annotate',
        '--directory',
        'python',
      ],
      {
        cwd: new URL('../../../../', import.meta.url),
        encoding: 'utf8',
        env: { ...process.env, UV_PYTHON_DOWNLOADS: 'never' },
      },
    );
    for (const python of ['3.11', '3.12']) {
      const env = linuxX86_64(python);
      const expected = exported
        .split('\n')
        .filter((l) => l.trim() !== '')
        .flatMap((l) => {
          const [req, marker] = l.split(' ; ');
          return !marker || evaluateMarker(marker, env) ? [req!.trim()] : [];
        })
        .sort();
      const read = pipelinePins(UV_LOCK, env).map((p) => `${p.name}==${p.version}`);
      expect(read.sort()).toEqual(expected);
    }
  });
  it("include kdgat's own dependencies at pyproject.toml's pins, torch's CUDA 12.8 libraries on linux, and no dev tools", () => {
    const pins = pipelinePins(UV_LOCK, linuxX86_64('3.12'));
    expect(dependencyMismatches(pins, PIPELINE_DEPENDENCIES)).toEqual([]);
    expect(pins).toContainEqual({ name: 'nvidia-nvjitlink-cu12', version: '12.8.93' });
    expect(pins.map((p) => p.name)).not.toContain('pytest');
    expect(pins.map((p) => p.name)).not.toContain('kdgat');
  });
  it('names the file and the package when the lock is broken', () => {
    expect(() => pipelinePins('version = 1\n', linuxX86_64('3.12'))).toThrow(
      new LockfileError('python/uv.lock: no [[package]] entries: not a uv.lock'),
    );
    const noNumpy = UV_LOCK.replace(
      /\[\[package\]\]\nname = "numpy"\n/,
      '[[package]]\nname = "numpy-gone"\n',
    );
    expect(() => pipelinePins(noNumpy, linuxX86_64('3.12'))).toThrow(
      /python\/uv.lock: .* depends on numpy, which has no \[\[package\]\] entry/,
    );
    expect(() => projectDependencies('[project]\ndependencies = ["torch>=2"]\n')).toThrow(
      'python/pyproject.toml: [project].dependencies entry "torch>=2": expected an exact pin such as "torch==2.9.1"',
    );
  });
});

describe('GPU layers (python/gpu)', () => {
  it('are the python/gpu/*.in files, each with its checked-in lock', () => {
    const dir = readdirSync(new URL('../../../../python/gpu/', import.meta.url));
    expect(
      dir
        .filter((f) => f.endsWith('.in'))
        .map((f) => f.slice(0, -3))
        .sort(),
    ).toEqual([...GPU_LAYER_NAMES].sort());
    for (const name of GPU_LAYER_NAMES) expect(dir).toContain(`${name}.lock`);
  });
  it.each(GPU_LAYER_NAMES)(
    "%s: its lock is fresh — every pin of the pipeline at uv.lock's version (else run `bash scripts/lock-gpu.sh`)",
    (name) => {
      expect(stalePins(name)).toEqual([]);
    },
  );
  it.each(GPU_LAYER_NAMES)('%s: its lock is built for the CUDA the layer declares', (name) => {
    const majors = cudaMajorsOf(gpuLayerPins(name));
    expect(Math.max(...majors)).toBe(Number(GPU_LAYERS[name].cuda.split('.')[0]));
  });
  it('cuda12 adds nothing to the pipeline (torch from PyPI is its CUDA 12.8 build); cuda13-rapids adds RAPIDS 26.10 for CUDA 13', () => {
    expect(gpuLayerPins('cuda12')).toEqual(pipelinePinsFor('cuda12'));
    const rapids = gpuLayerPins('cuda13-rapids');
    for (const p of ['cudf-cu13', 'cugraph-cu13', 'cugraph-pyg-cu13'])
      expect(rapids.find((r) => r.name === p)?.version).toMatch(/^26\.10\./);
    expect(cudaMajorsOf(rapids)).toEqual([12, 13]);
  });
  it('a stale layer lock is found, naming the package and both versions', () => {
    const bumped = withUvLock(bump(UV_LOCK, 'psutil', '7.2.2', '7.2.3'));
    expect(stalePins('cuda13-rapids', bumped)).toEqual([
      { name: 'psutil', pipeline: '7.2.3', layer: '7.2.2' },
    ]);
  });
});

describe("every site environment carries kdgat's runtime dependencies exactly (python/pyproject.toml)", () => {
  it('presets without a GPU layer are the known ones: the cugraph-ops environment (conda only), the CPU conda environment and the CPU venv', () => {
    const without = Object.values(environmentPresets)
      .filter((e) => e.backend !== 'conda' || e.gpuLayer === undefined)
      .map((e) => e.name);
    expect(without.sort()).toEqual(['cpu-local', 'gnn-cpu', 'gnn-rapids-cugraphops']);
  });
  it('the CPU conda environment installs every pipeline pin for its Python with pip, no CUDA pin', () => {
    const cpu = environmentPresets['gnn-cpu'];
    expect(dependencyMismatches(sitePackages(cpu), PIPELINE_DEPENDENCIES)).toEqual([]);
    expect(cpu.backend === 'conda' && cpu.dependencies.some((d) => d.startsWith('cuda'))).toBe(false);
    const noPip = { ...cpu, dependencies: ['python=3.12'] };
    expect(environmentProblems(noPip).map((p) => p.message)).toEqual([
      'pipelinePins is installed with pip: add "pip" to dependencies',
    ]);
  });
  it.each(layered.map((e) => [e.name, e] as const))('preset %s', (_name, env) => {
    expect(dependencyMismatches(sitePackages(env), PIPELINE_DEPENDENCIES)).toEqual([]);
  });
  it.each(GPU_LAYER_NAMES)('layer %s', (name) => {
    expect(dependencyMismatches(gpuLayerPins(name), PIPELINE_DEPENDENCIES)).toEqual([]);
  });
  it('the check bites: a dependency missing from a list, or pinned otherwise, is named with both versions', () => {
    const pins = sitePackages(environmentPresets['gnn-rapids']).filter((p) => p.name !== 'optuna');
    const numpy = pins.findIndex((p) => p.name === 'numpy');
    pins[numpy] = { name: 'numpy', version: '2.3.0' };
    expect(dependencyMismatches(pins, PIPELINE_DEPENDENCIES)).toEqual([
      { name: 'numpy', expected: '2.4.6', found: '2.3.0' },
      { name: 'optuna', expected: '5.0.0' },
    ]);
  });
});

describe('the pip part of a layered environment', () => {
  it('gnn-rapids: conda keeps python, cuda-version and pip; pip gets every pin of the pipeline', () => {
    const env = environmentPresets['gnn-rapids'];
    const yml = renderEnvironmentYml(env);
    expect(yml).toContain('dependencies:\n  - cuda-version=12.8\n  - pip\n  - python=3.12\n  - pip:\n');
    const pins = pipelinePinsFor('cuda12').map((p) => `      - ${p.name}==${p.version}`);
    expect(yml.split('\n').filter((l) => l.startsWith('      - '))).toEqual([...pins].sort());
    expect(yml).toContain('      - torch==2.9.1\n');
  });
  it("a version bump in uv.lock changes exactly that package's line, in every layered environment", () => {
    const bumped = withUvLock(bump(UV_LOCK, 'psutil', '7.2.2', '7.2.3'));
    for (const env of layered) {
      const before = renderEnvironmentYml(env).split('\n');
      const after = renderEnvironmentYml(env, bumped).split('\n');
      expect(after.length).toBe(before.length);
      const changed = before.flatMap((l, i) => (l === after[i] ? [] : [[l, after[i]]]));
      expect(changed).toEqual([['      - psutil==7.2.2', '      - psutil==7.2.3']]);
    }
  });
  it("the spec's own pip lines are added, sorted with the pins", () => {
    expect(pipRequirements(conda({ pip: ['tensorboard==2.20.0'] }))).toContain('tensorboard==2.20.0');
  });
  it('presets pass every rule; the layer gives RAPIDS line and CUDA to the rules', () => {
    for (const env of layered) expect(messages(env)).toEqual([]);
    expect(rapidsLine(environmentPresets['gnn-rapids-cuda13'])).toEqual({ major: 26, minor: 10 });
    expect(rapidsLine(environmentPresets['gnn-rapids'])).toBeUndefined();
    expect(
      cudaOf(
        conda({ cudaVersion: undefined, dependencies: ['python=3.12', 'pip'], gpuLayer: 'cuda13-rapids' }),
      ),
    ).toEqual({ major: 13, minor: 0 });
  });
});

describe('GPU layer rules', () => {
  it('an unknown layer names the field, the value and the layers there are', () => {
    const r = EnvironmentSpecSchema.safeParse({
      backend: 'conda',
      channels: ['conda-forge'],
      dependencies: ['python=3.12'],
      gpuLayer: 'cuda11',
    });
    expect(r.error?.issues[0]?.message).toBe(
      'gpuLayer "cuda11": expected one of cuda12, cuda13-rapids (python/gpu/<name>.lock)',
    );
  });
  it('conda keeps only python, cuda-version and pip: a conda package the pip part pins is refused', () => {
    expect(
      messages(conda({ dependencies: ['python=3.12', 'cuda-version=12.8', 'pip', 'pytorch=2.8'] })),
    ).toEqual([
      'dependencies.3: "pytorch=2.8": torch==2.9.1 comes from the pip part (python/uv.lock, python/gpu/cuda12.lock); with a gpuLayer conda keeps only python, cuda-version, pip: remove it',
    ]);
  });
  it("a pip line that re-pins one of the pipeline's packages is refused", () => {
    expect(messages(conda({ pip: ['numpy==2.3.0'] }))).toEqual([
      'pip.0: "numpy==2.3.0": numpy is pinned to 2.4.6 by the pipeline or gpuLayer cuda12 (python/uv.lock, python/gpu/cuda12.lock): remove it, or change the pin there',
    ]);
  });
  it("the layer's Python, pip, and its CUDA major", () => {
    expect(messages(conda({ dependencies: ['python=3.11', 'cuda-version=12.8', 'pip'] }))).toEqual([
      'dependencies.0: gpuLayer cuda12 is locked for Python 3.12 (python/gpu/cuda12.lock): pin python=3.12, not "python=3.11"',
    ]);
    expect(messages(conda({ dependencies: ['python=3.12', 'cuda-version=12.8'] }))).toEqual([
      'dependencies: gpuLayer cuda12 is installed with pip: add "pip" to dependencies',
    ]);
    expect(messages(conda({ gpuLayer: 'cuda13-rapids' }))).toEqual([
      'cudaVersion: gpuLayer cuda13-rapids is built for CUDA 13 (python/gpu/cuda13-rapids.lock), but the environment targets CUDA 12.8: set cudaVersion and cuda-version to 13.0',
    ]);
  });
  it('a CUDA 13 layer is refused on a cluster whose GPUs are all V100, accepted on Ascend and Cardinal', () => {
    const cuda13 = environmentPresets['gnn-rapids-cuda13'];
    expect(environmentClusterProblems(cuda13, clusterPresets['osc-pitzer'])).toEqual([
      {
        path: ['gpuLayer'],
        message:
          "environment gnn-rapids-cuda13 is built for CUDA 13.0 (gpuLayer cuda13-rapids), which does not run on osc-pitzer's GPUs (v100; CUDA 13 dropped Volta): expected a CUDA 12 environment such as gnn-rapids (gpuLayer cuda12)",
      },
    ]);
    expect(environmentClusterProblems(cuda13, clusterPresets['osc-ascend'])).toEqual([]);
    expect(environmentClusterProblems(cuda13, clusterPresets['osc-cardinal'])).toEqual([]);
    expect(
      environmentClusterProblems(environmentPresets['gnn-rapids'], clusterPresets['osc-pitzer']),
    ).toEqual([]);
    const repo = new URL('../../../../', import.meta.url).pathname;
    expect(() =>
      siteFromStackConfig({ cluster: 'osc-pitzer', environment: 'gnn-rapids-cuda13' }, repo),
    ).toThrow(
      /stack config environment gnn-rapids-cuda13 breaks 1 rule\(s\):\nenvironments\[0\]\.gpuLayer: environment gnn-rapids-cuda13 is built for CUDA 13.0/,
    );
    expect(
      siteFromStackConfig({ cluster: 'osc-cardinal', environment: 'gnn-rapids-cuda13' }, repo)
        .environments[0]!.spec,
    ).toMatchObject({ gpuLayer: 'cuda13-rapids' });
  });
  it('a spec that runs gnn-rapids-cuda13 on a V100 partition is refused by the CUDA-13-on-Volta rule; on H100 it resolves', () => {
    const text = PITZER_SPEC.replace('environment: gnn-rapids', 'environment: gnn-rapids-cuda13');
    let err: unknown;
    try {
      loadExperimentSpec({ text, file: 'spec.yaml' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SpecValidationError);
    expect((err as SpecValidationError).issues[0]!.message).toContain(
      'environment gnn-rapids-cuda13 is built for CUDA 13.0, whose builds exclude v100 (Volta)',
    );
    const cardinal = text
      .replace('cluster: osc-pitzer', 'cluster: osc-cardinal')
      .replace('type: v100', 'type: h100');
    expect(loadExperimentSpec({ text: cardinal, file: 'spec.yaml' }).resolved.partition.name).toBe('gpu');
  });
});
