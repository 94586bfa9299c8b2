// Environment presets. Versions are pins a researcher can read in a diff; bump them with a reviewed change.
import { EnvironmentSpecSchema, type EnvironmentSpec } from './schema.ts';

const inputs = {
  // Current RAPIDS, CUDA-12 build (V100-capable), cuda-version pinned to the clusters' cuda/12.4.1 module.
  'gnn-rapids': {
    name: 'gnn-rapids',
    backend: 'conda',
    frontend: 'conda',
    channels: ['rapidsai', 'conda-forge'],
    cudaVersion: '12.4',
    dependencies: [
      'python=3.12',
      'cuda-version=12.4',
      'cugraph=26.10',
      'pytorch=2.8',
      'pytorch_geometric=2.8',
      'lightning=2.5',
      'torchmetrics=1.8',
      'pydantic=2.12',
      'numpy=2.3',
      'pyarrow=21',
      'psutil',
    ],
    pip: [],
  },
  // RAPIDS 24.12 with pylibcugraphops (the kernels of the fused GAT layer, use_cugraph), its last
  // release; PyG 2.8 because CuGraphGATConv passes edge features to those kernels only from 2.8.0.
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
  // CPU machines: a venv; the local stack layers the repository's uv environment (python/.venv) under it.
  'cpu-local': {
    name: 'cpu-local',
    backend: 'venv',
    python: '3.11',
    requirements: [],
  },
} as const;

export type EnvironmentPresetName = keyof typeof inputs;

export const environmentPresets: Record<EnvironmentPresetName, EnvironmentSpec> = Object.fromEntries(
  Object.entries(inputs).map(([k, v]) => [k, EnvironmentSpecSchema.parse(v)]),
) as Record<EnvironmentPresetName, EnvironmentSpec>;
