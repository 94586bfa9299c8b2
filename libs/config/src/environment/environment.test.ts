import { describe, expect, it } from 'vitest';
import {
  EnvironmentSpecSchema,
  environmentPresets,
  environmentProblems,
  environmentSpecHash,
  hasCugraphOps,
  normaliseMatchSpec,
  rapidsSupportsGpu,
  renderEnvironmentYml,
  type EnvironmentSpec,
} from '../index.ts';

const conda = (deps: string[], extra: Record<string, unknown> = {}): EnvironmentSpec =>
  EnvironmentSpecSchema.parse({
    name: 'x',
    backend: 'conda',
    channels: ['rapidsai', 'conda-forge'],
    dependencies: deps,
    ...extra,
  });
const messages = (env: EnvironmentSpec) => environmentProblems(env).map((p) => p.message);

describe('MatchSpec normalisation', () => {
  it.each([
    ['PyTorch=2.8', 'pytorch=2.8'],
    ['pytorch 2.8', 'pytorch=2.8'],
    ['pytorch 2.8 py312_0', 'pytorch=2.8=py312_0'],
    ['conda-forge::pytorch=2.8', 'conda-forge::pytorch=2.8'],
    ['numpy>=1.26,<2', 'numpy>=1.26,<2'],
    ['cuda-version==12.4', 'cuda-version==12.4'],
    ['psutil', 'psutil'],
  ])('%s -> %s', (input, out) => expect(normaliseMatchSpec(input)).toBe(out));

  it('rejects text that is not a MatchSpec, naming it', () => {
    const r = EnvironmentSpecSchema.safeParse({
      backend: 'conda',
      channels: ['conda-forge'],
      dependencies: ['py torch 2 3 4'],
    });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain('py torch 2 3 4');
  });
});

describe('canonical environment.yml', () => {
  it('is sorted, one package per line, channels in priority order', () => {
    expect(
      renderEnvironmentYml(
        conda(['pytorch=2.8', 'cugraph=26.10', 'python=3.12'], { pip: ['optuna==4.1.0'] }),
      ),
    ).toBe(
      'name: x\nchannels:\n  - rapidsai\n  - conda-forge\ndependencies:\n  - cugraph=26.10\n  - python=3.12\n  - pytorch=2.8\n  - pip:\n      - optuna==4.1.0\n',
    );
  });
  it('renders a venv as its interpreter plus pip requirements', () => {
    expect(
      renderEnvironmentYml(
        EnvironmentSpecSchema.parse({
          name: 'cpu',
          backend: 'venv',
          python: '3.11',
          requirements: ['b==1', 'a==2'],
        }),
      ),
    ).toBe('name: cpu\ndependencies:\n  - python=3.11\n  - pip:\n      - a==2\n      - b==1\n');
  });
  it('a one-package change is a one-line change and a new hash', () => {
    const a = renderEnvironmentYml(conda(['pytorch=2.7', 'numpy=2.3']));
    const b = renderEnvironmentYml(conda(['numpy=2.3', 'pytorch=2.8']));
    const changed = a.split('\n').filter((l, i) => l !== b.split('\n')[i]);
    expect(changed).toEqual(['  - pytorch=2.7']);
    expect(environmentSpecHash(conda(['pytorch=2.7']))).not.toBe(environmentSpecHash(conda(['pytorch=2.8'])));
    expect(environmentSpecHash(conda(['numpy=2.3', 'pytorch=2.8']))).toBe(
      environmentSpecHash(conda(['pytorch 2.8', 'numpy=2.3'])),
    );
  });
});

describe("an environment's site modules", () => {
  const venv = (extra: Record<string, unknown> = {}) =>
    EnvironmentSpecSchema.parse({
      name: 'cpu',
      backend: 'venv',
      python: '3.11',
      requirements: ['b==1', 'a==2'],
      ...extra,
    });

  it('default to none, and without them the text and hash are what they were before the field existed', () => {
    expect(venv().modules).toEqual([]);
    expect(renderEnvironmentYml(venv())).toBe(
      'name: cpu\ndependencies:\n  - python=3.11\n  - pip:\n      - a==2\n      - b==1\n',
    );
    // The digest a stack provisioned before `modules` existed recorded for this spec.
    expect(environmentSpecHash(venv())).toBe(
      '7fd442fe4ee698f7af0f4271d1f2bcaec32f4c8bbbc879b8ed558acec35c43e8',
    );
    expect(environmentSpecHash(venv({ modules: [] }))).toBe(environmentSpecHash(venv()));
  });

  it('are part of the spec, in their load order: naming one (or reordering them) is a new hash', () => {
    const withPython = venv({ modules: ['python/3.12'] });
    expect(renderEnvironmentYml(withPython)).toBe(
      'name: cpu\ndependencies:\n  - python=3.11\n  - pip:\n      - a==2\n      - b==1\n' +
        '# modules (module load, in this order, before the interpreter runs):\n#   - python/3.12\n',
    );
    expect(environmentSpecHash(withPython)).not.toBe(environmentSpecHash(venv()));
    const two = (m: string[]) => environmentSpecHash(conda(['python=3.12'], { modules: m }));
    expect(two(['gcc/12', 'cuda/12.4.1'])).not.toBe(two(['cuda/12.4.1', 'gcc/12']));
  });

  it.each([
    ['venv', { backend: 'venv', python: '3.12' }],
    ['conda', { backend: 'conda', channels: ['conda-forge'], dependencies: ['python=3.12'] }],
  ])('a %s environment refuses a module name that is not one, naming the field and the value', (_, spec) => {
    const r = EnvironmentSpecSchema.safeParse({
      name: 'x',
      ...spec,
      modules: ['python/3.12', 'python 3.12; rm -rf ~'],
    });
    expect(r.success).toBe(false);
    const issue = r.error!.issues[0]!;
    expect(issue.path).toEqual(['modules', 1]);
    expect(issue.message).toContain('"python 3.12; rm -rf ~"');
    expect(issue.message).toContain('a module name such as cuda/12.4.1');
  });
});

describe('environment rules', () => {
  it('presets pass every rule', () => {
    for (const env of Object.values(environmentPresets)) expect(messages(env)).toEqual([]);
    expect(hasCugraphOps(environmentPresets['gnn-rapids-cugraphops'])).toBe(true);
    expect(hasCugraphOps(environmentPresets['gnn-rapids'])).toBe(false);
  });
  it('PyTorch from its own channel (stopped at 2.5)', () => {
    expect(messages(conda(['pytorch::pytorch=2.8']))[0]).toContain(
      "PyTorch's own conda channel stopped publishing at 2.5",
    );
    expect(messages(conda(['pytorch=2.8'], { channels: ['pytorch', 'conda-forge'] }))[0]).toContain(
      'the "pytorch" channel stopped at PyTorch 2.5',
    );
  });
  it('pylibcugraphops exists only up to 24.12', () => {
    expect(messages(conda(['pylibcugraphops=25.02', 'cuda-version=12.4']))).toContainEqual(
      expect.stringContaining('pylibcugraphops was last released as 24.12.00'),
    );
    expect(messages(conda(['pylibcugraphops=24.12', 'cugraph=24.12', 'cuda-version=12.4']))).toEqual([]);
  });
  it('the fused edge-aware GAT layer needs PyG >= 2.8 next to pylibcugraphops', () => {
    expect(
      messages(
        conda(['pylibcugraphops=24.12', 'cugraph=24.12', 'cuda-version=12.4', 'pytorch_geometric=2.6']),
      )[0],
    ).toContain('needs PyG >= 2.8 (CuGraphGATConv takes edge_attr from 2.8.0)');
    expect(
      messages(
        conda(['pylibcugraphops=24.12', 'cugraph=24.12', 'cuda-version=12.4', 'pytorch_geometric=2.8']),
      ),
    ).toEqual([]);
    expect(messages(conda(['cugraph=26.10', 'cuda-version=12.4', 'pytorch_geometric=2.6']))).toEqual([]); // no fused layer
    expect(environmentProblems(environmentPresets['gnn-rapids-cugraphops'])).toEqual([]);
  });
  it('RAPIDS >= 24.02 runs on Volta (V100) and newer only', () => {
    expect(rapidsSupportsGpu({ major: 24, minor: 12 }, 'v100')).toBe(true);
    expect(rapidsSupportsGpu({ major: 24, minor: 12 }, 'p100')).toBe(false);
    expect(rapidsSupportsGpu({ major: 23, minor: 12 }, 'p100')).toBe(true);
  });
  it('RAPIDS line vs CUDA', () => {
    expect(messages(conda(['cugraph=24.12', 'cuda-version=13.0']))[0]).toContain(
      'RAPIDS 24.12 has no CUDA 13 builds',
    );
    expect(messages(conda(['cugraph=25.10', 'cuda-version=11.8']))[0]).toContain(
      'RAPIDS 25.10 has no CUDA 11 builds',
    );
    expect(messages(conda(['cugraph=26.10', 'cuda-version=12.0']))[0]).toContain('need CUDA 12.2-12.9');
    expect(messages(conda(['cugraph=26.10', 'cuda-version=12.4']))).toEqual([]);
  });
  it('cudaVersion must agree with the cuda-version pin', () => {
    expect(messages(conda(['cuda-version=12.4'], { cudaVersion: '12.8' }))[0]).toContain(
      'cudaVersion 12.8 disagrees',
    );
  });
});
