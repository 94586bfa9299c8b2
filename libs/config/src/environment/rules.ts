// The domain rules of an environment: RAPIDS' published platform support (https://docs.rapids.ai/install)
// and PyG's installation notes for cuGraph (https://pytorch-geometric.readthedocs.io).
import {
  GPU_LAYERS,
  gpuLayerFile,
  pipNameOfConda,
  repositorySources,
  condaPython,
  sitePackages,
  type PipelineSources,
} from './gpu-layers.ts';
import { parseMatchSpec, versionOf, type MatchSpec } from './matchspec.ts';
import type { EnvironmentSpec } from './schema.ts';
import { normaliseName } from './uv-lock.ts';

export interface EnvironmentProblem {
  path: (string | number)[];
  message: string;
}

const RAPIDS_PACKAGES = [
  'rapids',
  'cugraph',
  'cudf',
  'cuml',
  'pylibcugraph',
  'pylibcugraphops',
  'libcugraph',
];

function specs(env: EnvironmentSpec): MatchSpec[] {
  return env.backend === 'conda' ? env.dependencies.map(parseMatchSpec) : [];
}

export function hasCugraphOps(env: EnvironmentSpec): boolean {
  return specs(env).some((s) => s.name === 'pylibcugraphops');
}

/** The RAPIDS release line (YY.MM) of the environment, from its RAPIDS packages (conda, or its GPU layer's `-cuNN` wheels). */
export function rapidsLine(
  env: EnvironmentSpec,
  sources: PipelineSources = repositorySources,
): { major: number; minor: number } | undefined {
  for (const s of specs(env)) if (RAPIDS_PACKAGES.includes(s.name)) return versionOf(s);
  if (env.backend !== 'conda') return undefined;
  for (const p of sitePackages(env, sources))
    if (RAPIDS_PACKAGES.includes(p.name.replace(/-cu\d+$/, '')))
      return versionOf({ name: p.name, version: p.version });
  return undefined;
}

const majorMinor = (v: string) => {
  const [major, minor] = v.split('.').map(Number);
  return { major: major!, minor: minor! };
};

/** The CUDA major.minor the environment targets: `cudaVersion`, else its `cuda-version` pin, else its GPU layer's. */
export function cudaOf(env: EnvironmentSpec): { major: number; minor: number } | undefined {
  if (env.backend !== 'conda') return undefined;
  if (env.cudaVersion) return majorMinor(env.cudaVersion);
  const pin = specs(env).find((s) => s.name === 'cuda-version');
  if (pin) return versionOf(pin);
  return env.gpuLayer ? majorMinor(GPU_LAYERS[env.gpuLayer].cuda) : undefined;
}

/** Conda packages an environment with a GPU layer keeps: the interpreter, the CUDA pin and the pip that installs the rest. */
const CONDA_WITH_LAYER = ['python', 'cuda-version', 'pip'];

/** The rules of a GPU layer: conda keeps only what the pip part cannot give, and layer, Python and CUDA agree. */
function gpuLayerProblems(
  env: EnvironmentSpec & { backend: 'conda' },
  sources: PipelineSources,
): EnvironmentProblem[] {
  const layerName = env.gpuLayer;
  if (!layerName) return [];
  const layer = GPU_LAYERS[layerName];
  const file = gpuLayerFile(layerName);
  const out: EnvironmentProblem[] = [];
  const deps = specs(env);
  const site = new Map(sitePackages(env, sources).map((p) => [p.name, p.version]));
  const python = deps.findIndex((s) => s.name === 'python');
  const pv = python >= 0 ? versionOf(deps[python]!) : undefined;
  if (!pv || `${pv.major}.${pv.minor}` !== layer.python) {
    out.push({
      path: python >= 0 ? ['dependencies', python] : ['dependencies'],
      message: `gpuLayer ${layerName} is locked for Python ${layer.python} (${file}): pin python=${layer.python}${python >= 0 ? `, not "${env.dependencies[python]}"` : ' in dependencies'}`,
    });
  }
  if (!deps.some((s) => s.name === 'pip')) {
    out.push({
      path: ['dependencies'],
      message: `gpuLayer ${layerName} is installed with pip: add "pip" to dependencies`,
    });
  }
  deps.forEach((s, i) => {
    const pipName = pipNameOfConda(s.name);
    if (!CONDA_WITH_LAYER.includes(s.name) && site.has(pipName)) {
      out.push({
        path: ['dependencies', i],
        message: `"${env.dependencies[i]}": ${pipName}==${site.get(pipName)} comes from the pip part (python/uv.lock, ${file}); with a gpuLayer conda keeps only ${CONDA_WITH_LAYER.join(', ')}: remove it`,
      });
    }
  });
  env.pip.forEach((line, i) => {
    const name = normaliseName(/^[A-Za-z0-9][A-Za-z0-9_.-]*/.exec(line)?.[0] ?? line);
    if (site.has(name)) {
      out.push({
        path: ['pip', i],
        message: `"${line}": ${name} is pinned to ${site.get(name)} by the pipeline or gpuLayer ${layerName} (python/uv.lock, ${file}): remove it, or change the pin there`,
      });
    }
  });
  const cuda = cudaOf(env);
  const layerMajor = majorMinor(layer.cuda).major;
  if (cuda && cuda.major !== layerMajor) {
    out.push({
      path: ['cudaVersion'],
      message: `gpuLayer ${layerName} is built for CUDA ${layerMajor} (${file}), but the environment targets CUDA ${cuda.major}.${cuda.minor}: set cudaVersion and cuda-version to ${layer.cuda}`,
    });
  }
  return out;
}

const line = (v: { major: number; minor: number }) => `${v.major}.${String(v.minor).padStart(2, '0')}`;

/** Rules that hold for an environment on its own (GPU-architecture rules need the partition). */
export function environmentProblems(
  env: EnvironmentSpec,
  sources: PipelineSources = repositorySources,
): EnvironmentProblem[] {
  const out: EnvironmentProblem[] = [];
  if (env.backend !== 'conda') return out;
  out.push(...gpuLayerProblems(env, sources));
  if (env.pipelinePins && !env.gpuLayer) {
    if (condaPython(env.dependencies) === undefined)
      out.push({
        path: ['dependencies'],
        message: `pipelinePins installs python/uv.lock's pins for the environment's Python: pin it in dependencies, e.g. "python=3.12"`,
      });
    if (!env.dependencies.some((d) => /^pip(\W|$)/.test(d)))
      out.push({
        path: ['dependencies'],
        message: `pipelinePins is installed with pip: add "pip" to dependencies`,
      });
  }
  const deps = specs(env);
  deps.forEach((s, i) => {
    if (['pytorch', 'torchvision', 'torchaudio'].includes(s.name) && s.channel === 'pytorch') {
      out.push({
        path: ['dependencies', i],
        message: `"${env.dependencies[i]}": PyTorch's own conda channel stopped publishing at 2.5; take ${s.name} from conda-forge (write "${s.name}=<version>" with conda-forge in channels)`,
      });
    }
    if (s.name === 'pytorch_geometric' && deps.some((d) => d.name === 'pylibcugraphops')) {
      // The fused edge-aware GAT layer (use_cugraph) subclasses PyG's CuGraphGATConv, whose forward
      // passes edge_attr to cugraph-ops only from PyG 2.8.0 (2.6/2.7 take no edge_attr).
      const v = versionOf(s);
      if (v && (v.major < 2 || (v.major === 2 && v.minor < 8))) {
        out.push({
          path: ['dependencies', i],
          message: `"${env.dependencies[i]}": the fused GAT layer with edge features (use_cugraph) needs PyG >= 2.8 (CuGraphGATConv takes edge_attr from 2.8.0): pin pytorch_geometric=2.8`,
        });
      }
    }
    if (s.name === 'pylibcugraphops') {
      const v = versionOf(s);
      if (v && (v.major > 24 || (v.major === 24 && v.minor > 12))) {
        out.push({
          path: ['dependencies', i],
          message: `"${env.dependencies[i]}": pylibcugraphops was last released as 24.12.00 (RAPIDS stopped publishing it from 25.02); pin pylibcugraphops=24.12 and RAPIDS 24.12`,
        });
      }
    }
  });
  const pytorchChannel = env.channels.indexOf('pytorch');
  if (pytorchChannel >= 0 && deps.some((s) => s.name === 'pytorch')) {
    out.push({
      path: ['channels', pytorchChannel],
      message: `the "pytorch" channel stopped at PyTorch 2.5: remove it and take pytorch from conda-forge`,
    });
  }
  const pin = deps.find((s) => s.name === 'cuda-version');
  const pinned = pin ? versionOf(pin) : undefined;
  if (env.cudaVersion && pinned && `${pinned.major}.${pinned.minor}` !== env.cudaVersion) {
    out.push({
      path: ['cudaVersion'],
      message: `cudaVersion ${env.cudaVersion} disagrees with the dependency "${pin?.name}=${pin?.version}": pin cuda-version=${env.cudaVersion}`,
    });
  }
  const cuda = cudaOf(env);
  const rapids = rapidsLine(env, sources);
  if (cuda && rapids) {
    const r = rapids.major * 100 + rapids.minor;
    if (cuda.major <= 11 && r >= 2508) {
      out.push({
        path: ['cudaVersion'],
        message: `RAPIDS ${line(rapids)} has no CUDA 11 builds (dropped in 25.08): use CUDA 12`,
      });
    }
    if (cuda.major >= 13 && r < 2510) {
      out.push({
        path: ['cudaVersion'],
        message: `RAPIDS ${line(rapids)} has no CUDA ${cuda.major} builds (they start with 25.10): use CUDA 12 or a newer RAPIDS`,
      });
    }
    if (cuda.major === 12 && r >= 2600 && cuda.minor < 2) {
      out.push({
        path: ['cudaVersion'],
        message: `RAPIDS ${line(rapids)} CUDA-12 builds need CUDA 12.2-12.9, not ${cuda.major}.${cuda.minor}`,
      });
    }
  }
  return out;
}

/** GPU architectures a CUDA major supports, for the partition's GPU type. */
export function cudaSupportsGpu(cudaMajor: number, gpuType: string): boolean {
  // CUDA 13 dropped Maxwell, Pascal and Volta: V100 needs CUDA <= 12.
  return !(cudaMajor >= 13 && ['v100', 'p100', 'k80', 'm60'].includes(gpuType));
}

/** Whether a RAPIDS line runs on the partition's GPU type: from 24.02 RAPIDS needs compute
 *  capability 7.0 (Volta) or newer (RAPIDS notice RSN 34), so V100 is in and P100/K80/M60 are out. */
export function rapidsSupportsGpu(rapids: { major: number; minor: number }, gpuType: string): boolean {
  return !(rapids.major * 100 + rapids.minor >= 2402 && ['p100', 'k80', 'm60'].includes(gpuType));
}

/** The partitions of a cluster as the GPU rules see them. */
export interface GpuPartitionView {
  name: string;
  gpuType?: string | undefined;
  gpusPerNode: number;
}

/**
 * Rules that need the cluster: an environment whose CUDA none of the cluster's GPU partitions can
 * run (a CUDA 13 environment, or GPU layer, on Pitzer's V100s) is refused for the whole site.
 * A single partition is checked per stage when a spec is resolved (experiment/resolve.ts).
 */
export function environmentClusterProblems(
  env: EnvironmentSpec,
  cluster: { name: string; partitions: GpuPartitionView[] },
): EnvironmentProblem[] {
  const cuda = cudaOf(env);
  const gpus = cluster.partitions.filter((p) => p.gpusPerNode > 0 && p.gpuType);
  if (!cuda || gpus.length === 0 || gpus.some((p) => cudaSupportsGpu(cuda.major, p.gpuType!))) return [];
  const types = [...new Set(gpus.map((p) => p.gpuType!))].join(', ');
  const layer = env.backend === 'conda' && env.gpuLayer ? ` (gpuLayer ${env.gpuLayer})` : '';
  return [
    {
      path: env.backend === 'conda' && env.gpuLayer ? ['gpuLayer'] : ['cudaVersion'],
      message: `environment ${env.name} is built for CUDA ${cuda.major}.${cuda.minor}${layer}, which does not run on ${cluster.name}'s GPUs (${types}; CUDA 13 dropped Volta): expected a CUDA 12 environment such as gnn-rapids (gpuLayer cuda12)`,
    },
  ];
}
