// The domain rules of an environment: RAPIDS' published platform support (https://docs.rapids.ai/install)
// and PyG's installation notes for cuGraph (https://pytorch-geometric.readthedocs.io).
import { parseMatchSpec, versionOf, type MatchSpec } from './matchspec.ts';
import type { EnvironmentSpec } from './schema.ts';

export interface EnvironmentProblem {
  path: (string | number)[];
  message: string;
}

const RAPIDS_PACKAGES = ['rapids', 'cugraph', 'cudf', 'cuml', 'pylibcugraph', 'pylibcugraphops', 'libcugraph'];

function specs(env: EnvironmentSpec): MatchSpec[] {
  return env.backend === 'conda' ? env.dependencies.map(parseMatchSpec) : [];
}

export function hasCugraphOps(env: EnvironmentSpec): boolean {
  return specs(env).some((s) => s.name === 'pylibcugraphops');
}

/** The RAPIDS release line (YY.MM) of the environment, from its RAPIDS packages. */
export function rapidsLine(env: EnvironmentSpec): { major: number; minor: number } | undefined {
  for (const s of specs(env)) if (RAPIDS_PACKAGES.includes(s.name)) return versionOf(s);
  return undefined;
}

/** The CUDA major.minor the environment targets: `cudaVersion`, else its `cuda-version` pin. */
export function cudaOf(env: EnvironmentSpec): { major: number; minor: number } | undefined {
  if (env.backend !== 'conda') return undefined;
  if (env.cudaVersion) {
    const [major, minor] = env.cudaVersion.split('.').map(Number);
    return { major: major!, minor: minor! };
  }
  const pin = specs(env).find((s) => s.name === 'cuda-version');
  return pin ? versionOf(pin) : undefined;
}

const line = (v: { major: number; minor: number }) => `${v.major}.${String(v.minor).padStart(2, '0')}`;

/** Rules that hold for an environment on its own (GPU-architecture rules need the partition). */
export function environmentProblems(env: EnvironmentSpec): EnvironmentProblem[] {
  const out: EnvironmentProblem[] = [];
  if (env.backend !== 'conda') return out;
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
  const rapids = rapidsLine(env);
  if (cuda && rapids) {
    const r = rapids.major * 100 + rapids.minor;
    if (cuda.major <= 11 && r >= 2508) {
      out.push({ path: ['cudaVersion'], message: `RAPIDS ${line(rapids)} has no CUDA 11 builds (dropped in 25.08): use CUDA 12` });
    }
    if (cuda.major >= 13 && r < 2510) {
      out.push({ path: ['cudaVersion'], message: `RAPIDS ${line(rapids)} has no CUDA ${cuda.major} builds (they start with 25.10): use CUDA 12 or a newer RAPIDS` });
    }
    if (cuda.major === 12 && r >= 2600 && cuda.minor < 2) {
      out.push({ path: ['cudaVersion'], message: `RAPIDS ${line(rapids)} CUDA-12 builds need CUDA 12.2-12.9, not ${cuda.major}.${cuda.minor}` });
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
