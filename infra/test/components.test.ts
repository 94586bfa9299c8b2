// The component graph under pulumi.runtime.setMocks: which resources each component declares.
import { readFileSync } from 'node:fs';
import * as pulumi from '@pulumi/pulumi';
import {
  environmentPresets,
  environmentSpecHash,
  renderEnvironmentYml,
  repositorySources,
  type EnvironmentSpec,
  type PipelineSources,
} from '@kdgat/config';
import { beforeAll, describe, expect, it } from 'vitest';

interface Created {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
}
const created: Created[] = [];

beforeAll(() => {
  pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        created.push({ type: args.type, name: args.name, inputs: args.inputs });
        return {
          id: `${args.name}-id`,
          state: { ...args.inputs, lockHash: 'lockhash', appliedMode: args.inputs.mode },
        };
      },
      call: (args) => args.inputs,
    },
    'kdgat-hpc',
    'unit',
    true,
  );
});

const out = <T>(o: pulumi.Output<T>): Promise<T> => new Promise((resolve) => o.apply(resolve));
const local = { kind: 'local' as const };

describe('SlurmTemplates', () => {
  it('installs every rendered script executable under <projectRoot>/scripts and names it in the outputs', async () => {
    const { SlurmTemplates } = await import('../components/slurm-templates.ts');
    const t = new SlurmTemplates('scripts', {
      scripts: {
        'stage-data.sh': '#!/bin/bash\n',
        'train-gpu.sh': '#!/bin/bash\n',
        'epilog.sh': '#!/bin/bash\n',
      },
      dir: '/proj/scripts',
      connection: local,
    });
    expect(t.paths).toEqual({
      stageData: '/proj/scripts/stage-data.sh',
      trainGpu: '/proj/scripts/train-gpu.sh',
      epilog: '/proj/scripts/epilog.sh',
    });
    await new Promise((r) => setTimeout(r, 50));
    const files = created.filter(
      (c) => c.type === 'pulumi-nodejs:dynamic/kdgat:TargetFile' && c.name.startsWith('scripts-'),
    );
    expect(files.map((f) => [f.inputs.path, f.inputs.mode])).toEqual([
      ['/proj/scripts/epilog.sh', '0755'],
      ['/proj/scripts/stage-data.sh', '0755'],
      ['/proj/scripts/train-gpu.sh', '0755'],
    ]);
  });

  it('installs the job library under lib/, named by its sha256, read-only, as one resource for every version', async () => {
    const { SlurmTemplates } = await import('../components/slurm-templates.ts');
    const library = {
      file: 'job-0123456789abcdef.sh',
      text: '# shellcheck shell=bash\n',
      sha256: 'ab'.repeat(32),
    };
    const t = new SlurmTemplates('sitelib', {
      scripts: {},
      dir: '/proj/scripts',
      connection: local,
      library,
    });
    expect(t.jobLibrary).toEqual({
      path: '/proj/scripts/lib/job-0123456789abcdef.sh',
      sha256: library.sha256,
    });
    await new Promise((r) => setTimeout(r, 50));
    // One resource name for every version: a new one previews as the old file's replacement, line by line.
    const file = created.find((c) => c.name === 'sitelib-job-library')!;
    expect(file.inputs).toMatchObject({ path: '/proj/scripts/lib/job-0123456789abcdef.sh', mode: '0444' });
    expect(file.inputs.content).toBe(library.text);
  });
});

describe('ScratchCacheLayout', () => {
  it('declares root (with README and purge policy), runs, logs and one cache dir per dataset', async () => {
    const { ScratchCacheLayout } = await import('../components/scratch-cache-layout.ts');
    const layout = {
      root: '/fs/scratch/PAS1266/kd-gat',
      cacheDirs: {
        hcrl_sa: '/fs/scratch/PAS1266/kd-gat/cache/hcrl_sa',
        set_01: '/fs/scratch/PAS1266/kd-gat/cache/set_01',
      },
      runsDir: '/fs/scratch/PAS1266/kd-gat/runs',
      logsDir: '/fs/scratch/PAS1266/kd-gat/logs',
      codeDir: '/fs/scratch/PAS1266/kd-gat/code',
      shellsDir: '/fs/scratch/PAS1266/kd-gat/shells',
      mode: '3770' as const,
      purgeDays: 60,
    };
    new ScratchCacheLayout('scratch', { layout, connection: local, clusterName: 'pitzer', group: 'PAS1266' });
    await new Promise((r) => setTimeout(r, 50));
    const dirs = created.filter((c) => c.type === 'pulumi-nodejs:dynamic/kdgat:TargetDirectory');
    expect(dirs.map((d) => d.inputs.path).sort()).toEqual([
      layout.root,
      layout.cacheDirs.hcrl_sa,
      layout.cacheDirs.set_01,
      layout.codeDir,
      layout.logsDir,
      layout.runsDir,
      layout.shellsDir,
    ]);
    // setgid and sticky: members make entries, none renames or removes another's
    expect(dirs.every((d) => d.inputs.mode === '3770' && d.inputs.group === 'PAS1266')).toBe(true);
    const readme = dirs.find((d) => d.inputs.path === layout.root)!.inputs.readme as string;
    expect(readme).toContain('not accessed for 60 days are purged');
    expect(readme).toContain('never deletes cached data');
    expect(readme).toContain('/fs/scratch/PAS1266/kd-gat/cache/hcrl_sa');
  });
});

describe('CondaEnvironment', () => {
  it('declares one environment with the canonical spec text, the package list, the lock beside the spec', async () => {
    const { CondaEnvironment } = await import('../components/conda-environment.ts');
    const yml =
      'name: gnn-rapids\nchannels:\n  - rapidsai\n  - conda-forge\ndependencies:\n  - cugraph=26.10\n  - pytorch=2.8\n';
    const env = new CondaEnvironment('gnn', {
      spec: { name: 'gnn-rapids', backend: 'conda', adopt: false },
      environmentYml: yml,
      specHash: 'spechash',
      connection: pulumi.secret({
        kind: 'ssh' as const,
        host: 'h',
        port: 22,
        user: 'u',
        hostKey: 'k',
        privateKey: 'KEY',
      }),
      owner: 'kdgat-hpc/unit',
      prefix: '/proj/envs/gnn-rapids',
      envsDir: '/proj/envs',
      frontend: 'conda',
      frontendCommand: 'conda',
      cudaVersion: '12.4',
    });
    expect(env.lockPath).toBe('/proj/envs/gnn-rapids.lock.txt');
    expect(env.specPath).toBe('/proj/envs/gnn-rapids.environment.yml');
    expect(await out(env.lockHash)).toBe('lockhash');
    const e = created.find((c) => c.type === 'pulumi-nodejs:dynamic/kdgat:Environment')!;
    expect(e.inputs).toMatchObject({
      name: 'gnn-rapids',
      environmentYml: `%kdgat-hpc environment.yml (canonical; previews diff it line by line)
${yml}`,
      adopt: false,
      owner: 'kdgat-hpc/unit',
      // a login node has no GPU: the solve is told the CUDA the spec targets, and the preview shows it
      solveEnvironment: { CONDA_OVERRIDE_CUDA: '12.4' },
    });
  });

  it('refuses a venv spec with a conda frontend, naming both', async () => {
    const { CondaEnvironment } = await import('../components/conda-environment.ts');
    expect(
      () =>
        new CondaEnvironment('bad', {
          spec: { name: 'cpu-local', backend: 'venv', adopt: false },
          environmentYml: '',
          specHash: 'x',
          connection: local,
          owner: 'o',
          prefix: '/p',
          envsDir: '/e',
          frontend: 'conda',
          frontendCommand: 'conda',
        }),
    ).toThrow("environment cpu-local: backend 'venv' is built with frontend 'pip', got frontend 'conda'");
  });
});

describe('CondaEnvironment of a site environment (pipeline pins + GPU layer)', () => {
  const uvLock = readFileSync(new URL('../../python/uv.lock', import.meta.url), 'utf8');
  const entry = 'name = "psutil"\nversion = "7.2.2"\n';
  const bumped: PipelineSources = {
    uvLock: uvLock.replace(entry, 'name = "psutil"\nversion = "7.2.3"\n'),
    layerLock: repositorySources.layerLock,
  };
  const layered = Object.values(environmentPresets).filter(
    (e): e is EnvironmentSpec & { backend: 'conda' } => e.backend === 'conda' && e.gpuLayer !== undefined,
  );

  async function environmentInputs(
    resourceName: string,
    spec: EnvironmentSpec,
    sources: PipelineSources,
  ): Promise<Record<string, unknown>> {
    const { CondaEnvironment } = await import('../components/conda-environment.ts');
    new CondaEnvironment(resourceName, {
      spec,
      environmentYml: renderEnvironmentYml(spec, sources),
      specHash: environmentSpecHash(spec, sources),
      connection: local,
      owner: 'kdgat-hpc/unit',
      prefix: `/proj/envs/${spec.name}`,
      envsDir: '/proj/envs',
      frontend: 'conda',
      frontendCommand: 'conda',
    });
    await new Promise((r) => setTimeout(r, 50));
    return created.find(
      (c) => c.type === 'pulumi-nodejs:dynamic/kdgat:Environment' && c.name === resourceName,
    )!.inputs;
  }

  it("a version bump in uv.lock changes exactly that package's line of every layered environment's inputs", async () => {
    expect(uvLock).toContain(entry);
    expect(layered.map((e) => e.name).sort()).toEqual(['gnn-rapids', 'gnn-rapids-cuda13']);
    for (const spec of layered) {
      const before = await environmentInputs(`${spec.name}-before`, spec, repositorySources);
      const after = await environmentInputs(`${spec.name}-after`, spec, bumped);
      const a = (before.environmentYml as string).split('\n');
      const b = (after.environmentYml as string).split('\n');
      expect(b.length).toBe(a.length);
      expect(a.flatMap((line, i) => (line === b[i] ? [] : [[line, b[i]]]))).toEqual([
        ['      - psutil==7.2.2', '      - psutil==7.2.3'],
      ]);
      // what else differs is the spec's hash; how it is built does not
      const changedKeys = Object.keys(before).filter(
        (k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]),
      );
      expect(changedKeys.sort()).toEqual(['environmentYml', 'specHash']);
    }
  });
});
