// What a site environment's pip part is: the pipeline's pinned runtime dependencies (python/uv.lock)
// plus its GPU layer (python/gpu/<layer>.lock, resolved against PyPI beside those pins by
// `bash scripts/lock-gpu.sh`). docs/decisions/0006-one-lock-and-gpu-layers.md says why there is one
// layer per GPU generation. This module is the one reader of those files; tests pass the texts in.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { workspaceRootInUse } from '../workspace/workspace.ts';
import { linuxX86_64 } from './markers.ts';
import type { EnvironmentSpec } from './schema.ts';
import { requirementsPins, requirementsSources } from './requirements.ts';
import { LockfileError, normaliseName, pipelinePins, type Pin } from './uv-lock.ts';

/** The GPU layers there are (each is python/gpu/<name>.in, locked into <name>.lock). */
export const GPU_LAYERS = {
  // torch's PyPI build (CUDA 12.8, sm_70..sm_120): Pitzer's V100 and everything newer. No RAPIDS.
  cuda12: { cuda: '12.8', python: '3.12', gpus: 'V100 (Pitzer), A100 (Ascend), H100 (Cardinal)' },
  // RAPIDS 26.10 for CUDA 13 beside torch's CUDA 12.8 build: A100 and H100 only (CUDA 13 has no Volta).
  'cuda13-rapids': { cuda: '13.0', python: '3.12', gpus: 'A100 (Ascend), H100 (Cardinal)' },
} as const satisfies Record<string, { cuda: string; python: string; gpus: string }>;

export type GpuLayerName = keyof typeof GPU_LAYERS;
export const GPU_LAYER_NAMES = Object.keys(GPU_LAYERS) as [GpuLayerName, ...GpuLayerName[]];

/** Where the layer files live, relative to the repository root (for messages). */
export const gpuLayerFile = (name: string, ext: 'in' | 'lock' = 'lock') => `python/gpu/${name}.${ext}`;

/** The texts a site environment's pip part is computed from. */
export interface PipelineSources {
  /** python/uv.lock */
  uvLock: string;
  /** python/gpu/<name>.lock */
  layerLock(name: GpuLayerName): string;
}

const REPO = new URL('../../../../', import.meta.url);
const cache = new Map<string, string>();
function repoFile(path: string, base: URL = REPO): string {
  const key = new URL(path, base).href;
  let text = cache.get(key);
  if (text === undefined) {
    try {
      text = readFileSync(new URL(path, base), 'utf8');
    } catch (e) {
      throw new LockfileError(
        `${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)}): the site environments are built from it`,
      );
    }
    cache.set(key, text);
  }
  return text;
}

/**
 * A file an environment declares (its `pipelineLock.file`): relative to the workspace the command
 * works in ($KDGAT_HPC_WORKSPACE, set by the runner and by infra's stack script), else to this
 * checkout, whose own stacks and examples are a workspace at its root.
 */
function workspaceFile(path: string): string {
  const root = workspaceRootInUse();
  return repoFile(path, root ? pathToFileURL(root.endsWith('/') ? root : `${root}/`) : REPO);
}

/** The repository's own files (read once per process). */
export const repositorySources: PipelineSources = {
  get uvLock() {
    return repoFile('python/uv.lock');
  },
  layerLock: (name) => repoFile(gpuLayerFile(name)),
};

// Parsed lists per sources object: every spec a runner or bench loads asks again (the uv.lock
// parse is tens of milliseconds). Callers get copies.
const parsed = new WeakMap<PipelineSources, Map<string, Pin[]>>();
function remembered(sources: PipelineSources, key: string, compute: () => Pin[]): Pin[] {
  let lists = parsed.get(sources);
  if (!lists) parsed.set(sources, (lists = new Map()));
  let pins = lists.get(key);
  if (!pins) lists.set(key, (pins = compute()));
  return pins.map((p) => ({ ...p }));
}

/** The `name==version` lines of a `uv pip compile` lock (comments and `# via` lines skipped). */
export function layerLockPins(text: string, file: string): Pin[] {
  const pins: Pin[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trimEnd();
    if (line === '' || /^\s*#/.test(line)) return;
    const m = /^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)$/.exec(line);
    if (!m)
      throw new LockfileError(
        `${file}:${i + 1}: ${JSON.stringify(line)} is not a "name==version" line: regenerate it with \`bash scripts/lock-gpu.sh\``,
      );
    pins.push({ name: normaliseName(m[1]!), version: m[2]! });
  });
  return pins;
}

/** The packages of a GPU layer's lock: the whole pip part it was resolved as, pipeline included. */
export function gpuLayerPins(name: GpuLayerName, sources: PipelineSources = repositorySources): Pin[] {
  return remembered(sources, `layer:${name}`, () =>
    layerLockPins(sources.layerLock(name), gpuLayerFile(name)),
  );
}

/** The pipeline's pins for the machines a layer is built for (linux x86_64, the layer's Python). */
export function pipelinePinsFor(name: GpuLayerName, sources: PipelineSources = repositorySources): Pin[] {
  const python = GPU_LAYERS[name].python;
  return remembered(sources, `pipeline:${python}`, () => pipelinePins(sources.uvLock, linuxX86_64(python)));
}

/**
 * The pip packages of an environment with a GPU layer, sorted by name: every pin of the pipeline
 * (uv.lock wins, so a bump there shows at once), then what the layer adds. A venv with
 * `pipelinePins`: the pipeline's pins alone. Empty otherwise.
 */
export function sitePackages(env: EnvironmentSpec, sources: PipelineSources = repositorySources): Pin[] {
  if (env.backend === 'venv') {
    if (!env.pipelinePins) return [];
    const python = env.python;
    const own = env.pipelineLock;
    if (own)
      return remembered(
        sources,
        `lock:${workspaceRootInUse() ?? ''}:${own.file}:${own.project ?? ''}:${python}`,
        () =>
          own.file.endsWith('.txt')
            ? requirementsPins(workspaceFile(own.file), linuxX86_64(python), own.file)
            : pipelinePins(workspaceFile(own.file), linuxX86_64(python), own.project!, own.file),
      ).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return remembered(sources, `pipeline:${python}`, () => pipelinePins(sources.uvLock, linuxX86_64(python)))
      .map((p) => ({ ...p }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
  if (!env.gpuLayer) {
    const python = condaPython(env.dependencies);
    if (!env.pipelinePins || python === undefined) return [];
    return remembered(sources, `pipeline:${python}`, () => pipelinePins(sources.uvLock, linuxX86_64(python)))
      .map((p) => ({ ...p }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
  const pins = new Map(pipelinePinsFor(env.gpuLayer, sources).map((p) => [p.name, { ...p }]));
  for (const p of gpuLayerPins(env.gpuLayer, sources)) if (!pins.has(p.name)) pins.set(p.name, { ...p });
  return [...pins.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * The package sources an environment's own requirements-file lock names (`--extra-index-url …`,
 * `--find-links …`), passed to the site's pip as they are; none for a uv.lock (its second indexes
 * reach the build per package, by direct reference) or any other environment.
 */
export function siteSourceOptions(env: EnvironmentSpec): string[] {
  if (env.backend !== 'venv' || !env.pipelinePins || !env.pipelineLock?.file.endsWith('.txt')) return [];
  return requirementsSources(workspaceFile(env.pipelineLock.file), env.pipelineLock.file);
}

/** The `3.x` of a conda environment's `python=3.x` dependency, if it pins one. */
export function condaPython(dependencies: readonly string[]): string | undefined {
  for (const d of dependencies) {
    const m = /^python[=<>!~ ]+=?\s*(3\.\d+)/.exec(d);
    if (m) return m[1];
  }
  return undefined;
}

/** Where a layer's lock and the pipeline disagree: the lock was resolved against other pins. */
export function stalePins(
  name: GpuLayerName,
  sources: PipelineSources = repositorySources,
): { name: string; pipeline: string; layer: string | undefined }[] {
  const layer = new Map(gpuLayerPins(name, sources).map((p) => [p.name, p.version]));
  return pipelinePinsFor(name, sources)
    .filter((p) => layer.get(p.name) !== p.version)
    .map((p) => ({ name: p.name, pipeline: p.version, layer: layer.get(p.name) }));
}

/**
 * The CUDA majors a set of pip packages is built for: `-cu12`/`-cu13` names, `cupy-cuda13x`, and
 * CUDA 13's unsuffixed `nvidia-*` and `cuda-toolkit` wheels (their version is the CUDA version).
 */
export function cudaMajorsOf(pins: Pin[]): number[] {
  const majors = new Set<number>();
  for (const p of pins) {
    const suffix = /-cu(\d+)$/.exec(p.name) ?? /^cupy-cuda(\d+)x$/.exec(p.name);
    if (suffix) majors.add(Number(suffix[1]));
    else if (['nvidia-cuda-runtime', 'cuda-toolkit'].includes(p.name))
      majors.add(Number(p.version.split('.')[0]));
  }
  return [...majors].sort((a, b) => a - b);
}

/** Conda package names that are another name on PyPI. */
const CONDA_TO_PIP: Record<string, string> = { pytorch: 'torch', pytorch_geometric: 'torch-geometric' };
export const pipNameOfConda = (conda: string): string => normaliseName(CONDA_TO_PIP[conda] ?? conda);

/**
 * The dependencies (`name==version`, e.g. the default pipeline's `[project].dependencies`) that a package list
 * lacks or pins otherwise: `[]` when the list carries every one exactly.
 */
export function dependencyMismatches(
  packages: Pin[],
  dependencies: Pin[],
): { name: string; expected: string; found?: string }[] {
  const have = new Map(packages.map((p) => [normaliseName(p.name), p.version]));
  return dependencies
    .filter((d) => have.get(normaliseName(d.name)) !== d.version)
    .map((d) => {
      const found = have.get(normaliseName(d.name));
      return { name: normaliseName(d.name), expected: d.version, ...(found !== undefined ? { found } : {}) };
    });
}
