// Environment presets. Versions are pins a researcher can read in a diff; bump them with a reviewed change.
import { EnvironmentSpecSchema, type EnvironmentSpec } from './schema.ts';

const inputs = {
  // The site environment for Pitzer's V100s (and any newer GPU): conda gives Python, the CUDA pin and
  // the prefix; pip installs the pipeline's pins (python/uv.lock) with torch's CUDA 12.8 build
  // (python/gpu/cuda12.lock). No RAPIDS: none for CUDA 12 resolves beside those pins (decision 0006).
  'gnn-rapids': {
    name: 'gnn-rapids',
    backend: 'conda',
    frontend: 'conda',
    channels: ['conda-forge'],
    cudaVersion: '12.8',
    gpuLayer: 'cuda12',
    dependencies: ['python=3.12', 'cuda-version=12.8', 'pip'],
    pip: [],
  },
  // Ascend's A100s and Cardinal's H100s: the same pipeline pins plus RAPIDS 26.10 for CUDA 13
  // (python/gpu/cuda13-rapids.lock); refused on V100 partitions (CUDA 13 has no Volta).
  'gnn-rapids-cuda13': {
    name: 'gnn-rapids-cuda13',
    backend: 'conda',
    frontend: 'conda',
    channels: ['conda-forge'],
    cudaVersion: '13.0',
    gpuLayer: 'cuda13-rapids',
    dependencies: ['python=3.12', 'cuda-version=13.0', 'pip'],
    pip: [],
  },
  // RAPIDS 24.12 with pylibcugraphops (the kernels of the fused GAT layer, use_cugraph), its last
  // release; PyG 2.8 because CuGraphGATConv passes edge features to those kernels only from 2.8.0.
  // Conda only, without the pipeline's pins: pylibcugraphops 24.12 needs its own environment (decision 0006).
  'gnn-rapids-cugraphops': {
    name: 'gnn-rapids-cugraphops',
    backend: 'conda',
    frontend: 'conda',
    channels: ['rapidsai', 'conda-forge'],
    cudaVersion: '12.4',
    dependencies: [
      'python=3.11',
      'cuda-version=12.4',
      'cugraph=24.12',
      'pylibcugraphops=24.12',
      'pytorch=2.5',
      'pytorch_geometric=2.8',
      'lightning=2.4',
      'torchmetrics=1.6',
      'pydantic=2.9',
      'numpy=1.26',
      'pyarrow=17',
      'psutil',
    ],
    pip: [],
  },
  // CPU stages on a site's CPU nodes (preprocessing): conda gives Python and pip, pip installs the
  // pipeline's pins from python/uv.lock (torch's PyPI build runs on a CPU node); no CUDA pin.
  'gnn-cpu': {
    name: 'gnn-cpu',
    backend: 'conda',
    frontend: 'conda',
    channels: ['conda-forge'],
    dependencies: ['python=3.12', 'pip'],
    pipelinePins: true,
    pip: [],
  },
  // CPU machines: a venv with the pipeline's pins from python/uv.lock; the local stack layers the
  // repository's uv environment (python/.venv, the same lock) under it, so pip finds them installed.
  'cpu-local': {
    name: 'cpu-local',
    backend: 'venv',
    python: '3.11',
    pipelinePins: true,
    requirements: [],
  },
} as const;

export type EnvironmentPresetName = keyof typeof inputs;

export const environmentPresets: Record<EnvironmentPresetName, EnvironmentSpec> = Object.fromEntries(
  Object.entries(inputs).map(([k, v]) => [k, EnvironmentSpecSchema.parse(v)]),
) as Record<EnvironmentPresetName, EnvironmentSpec>;
