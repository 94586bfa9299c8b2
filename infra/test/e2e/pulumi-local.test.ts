// The `local` stack through the real Pulumi CLI: venv environment, scratch layout, scripts.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StackOutputs } from '@kdgat/config';
import { JOB_LIBRARY } from '@kdgat/slurm-templates';
import { TempStack, ok } from './pulumi-harness.ts';
import { localConfig } from './pulumi-local.config.ts';
import { makeWheels } from './tools.ts';

/** `pulumi-language-nodejs` processes whose parent is init (an update that started them is gone). */
function orphanLanguageHosts(): Set<number> {
  const ps = spawnSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' }).stdout;
  return new Set(
    ps
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
      .filter(([, ppid, cmd]) => ppid === '1' && /pulumi-language-nodejs$/.test(cmd ?? ''))
      .map(([pid]) => Number(pid)),
  );
}

describe('local stack with the Pulumi CLI', () => {
  let root: string;
  let wheels: string;
  let s: TempStack;
  let out: StackOutputs;

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'kdgat-local-'));
    wheels = makeWheels(join(root, 'wheels'), ['alpha==1.0', 'alpha==2.0', 'beta==0.1', 'gamma==3.0']);
    s = new TempStack('e2e-local', localConfig(root, wheels, ['alpha==1.0']));
  });
  afterAll(() => {
    s?.destroy();
  });

  it('an up killed while it builds the environment converges on the next up', async () => {
    const marker = join(root, 'project', 'envs', 'cpu-e2e.kdgat-owner.json');
    const hostsBefore = orphanLanguageHosts();
    const run = s.startUp();
    for (
      let i = 0;
      i < 1200 && !(existsSync(marker) && readFileSync(marker, 'utf8').includes('"building"'));
      i++
    ) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(readFileSync(marker, 'utf8')).toContain('"building"');
    process.kill(-run.pid, 'SIGKILL');
    await run.done;
    // Pulumi starts its language host in a process group of its own: the killed update's is left
    // running, reparented to init, serving nobody. Ended here, as a reboot would end it on a site.
    for (const pid of orphanLanguageHosts()) if (!hostsBefore.has(pid)) process.kill(pid, 'SIGKILL');
    // A kill can also land between the file backend truncating a checkpoint's `.attrs` sidecar and
    // writing it (every later command then fails "failed to load checkpoint: EOF"): made certain here.
    const attrs = join(s.backend, '.pulumi', 'stacks', 'kdgat-hpc', 'e2e-local.json.attrs');
    expect(existsSync(attrs)).toBe(true);
    writeFileSync(attrs, '');
    expect(s.cli(['stack', 'output', '--stack', 'e2e-local']).output).toContain(
      'failed to load checkpoint: EOF',
    );
    // the next up (what `nx run infra:up` runs; --summary, as the quickstart runs it) removes the
    // empty sidecar, clears the dead update's lock and builds again
    const r = s.script('up', ['--summary']);
    expect(r.output).toContain(
      '.pulumi/stacks/kdgat-hpc/e2e-local.json.attrs is empty (an update was killed while writing it); removing it',
    );
    expect(r.output).toContain('was interrupted');
    ok(r);
    // the summary: outputs and resource counts; resource by resource only in the log it names
    const log = /the summary below; resource by resource: (\S+)$/m.exec(r.stdout)?.[1];
    expect(log).toMatch(/\/\.hpc\/logs\/pulumi-up-e2e-local\.log$/);
    expect(r.stdout).toMatch(/^Outputs:\n[\s\S]*^Resources:\n\s+\+ \d+ created/m);
    expect(r.stdout).not.toContain('[urn=');
    expect(r.stdout).not.toContain('environmentYml');
    expect(r.stdout).not.toMatch(/kdgat:Environment\s+site-env-cpu-e2e\s+creat/);
    expect(readFileSync(log!, 'utf8')).toMatch(/kdgat:Environment\s+site-env-cpu-e2e\s+created/);
  });

  it('up creates the environment, the scratch layout and the scripts, and exports the contract outputs', () => {
    out = s.outputs();
    const env = out.environments[0]!;
    expect(env).toMatchObject({
      name: 'cpu-e2e',
      backend: 'venv',
      prefix: join(root, 'project', 'envs', 'cpu-e2e'),
    });
    expect(
      execFileSync(join(env.prefix, 'bin', 'python'), ['-c', 'import alpha; print(alpha.__version__)'], {
        encoding: 'utf8',
      }),
    ).toBe('1.0\n');
    const lock = readFileSync(env.lockPath, 'utf8');
    expect(lock).toContain('alpha==1.0');
    expect(env.lock).toBe(lock);
    expect(env.lockHash).toMatch(/^[0-9a-f]{64}$/);
    expect(env.specHash).toMatch(/^[0-9a-f]{64}$/);
    expect(env.activate).toContain(`${env.prefix}/bin/activate`);

    for (const dir of [
      out.scratch.root,
      out.scratch.runsDir,
      out.scratch.logsDir,
      ...Object.values(out.scratch.cacheDirs),
    ]) {
      expect(statSync(dir).isDirectory()).toBe(true);
    }
    expect(Object.keys(out.scratch.cacheDirs).sort()).toEqual(['hcrl_sa', 'set_01']);
    expect(readFileSync(join(out.scratch.root, 'README.md'), 'utf8')).toContain('Purge policy');

    expect(out.scripts.dir).toBe(join(root, 'project', 'scripts'));
    for (const key of ['stageData', 'epilog', 'trainGpu', 'preprocessGpu'] as const) {
      expect(statSync(out.scripts[key]).mode & 0o111).toBe(0o111);
    }
    // The job library every job script loads, named by its sha256, and the hand-use script loading it.
    expect(out.scripts.jobLibrary).toEqual({
      path: join(out.scripts.dir, 'lib', JOB_LIBRARY.file),
      sha256: JOB_LIBRARY.sha256,
    });
    expect(readFileSync(out.scripts.jobLibrary!.path, 'utf8')).toBe(JOB_LIBRARY.text);
    expect(readFileSync(out.scripts.trainGpu, 'utf8')).toContain(
      `hpc_job_library=${out.scripts.jobLibrary!.path}`,
    );
  });

  it('a second up reports no changes', () => {
    ok(s.up(['--expect-no-changes']));
  });

  it('a spec change shows the package lines in preview --diff, and up applies it', () => {
    s.setConfig(localConfig(root, wheels, ['alpha==2.0', 'beta==0.1']));
    const preview = ok(s.preview());
    expect(preview.stdout).toMatch(/^\s*-\s.*alpha==1\.0/m);
    expect(preview.stdout).toMatch(/^\s*\+\s.*alpha==2\.0/m);
    expect(preview.stdout).toMatch(/^\s*\+\s.*beta==0\.1/m);
    ok(s.up());
    expect(readFileSync(out.environments[0]!.lockPath, 'utf8')).toMatch(/alpha==2\.0[\s\S]*beta==0\.1/);
    ok(s.up(['--expect-no-changes']));
  });

  it('a package installed by hand is reported as drift by refresh and preview --refresh', () => {
    execFileSync(join(out.environments[0]!.prefix, 'bin', 'python'), [
      '-m',
      'pip',
      'install',
      '-q',
      '--no-index',
      '--find-links',
      wheels,
      'gamma==3.0',
    ]);
    const preview = s.preview(['--refresh', '--expect-no-changes']);
    expect(preview.code).not.toBe(0);
    expect(preview.output).toContain('gamma=3.0');
    const refresh = ok(s.refresh());
    expect(refresh.stdout).toMatch(/^\s*\+ gamma=3\.0$/m);
    // the next up rebuilds the environment to the spec: the hand-installed package is gone
    ok(s.up());
    ok(s.up(['--expect-no-changes']));
    const pipList = execFileSync(join(out.environments[0]!.prefix, 'bin', 'python'), ['-m', 'pip', 'list'], {
      encoding: 'utf8',
    });
    expect(pipList).not.toContain('gamma');
  });

  it('dropping a dataset keeps its cached data, and the preview says so', () => {
    writeFileSync(join(out.scratch.cacheDirs.set_01!, 'graphs.pt'), 'cached');
    s.setConfig(localConfig(root, wheels, ['alpha==2.0', 'beta==0.1'], ['hcrl_sa']));
    const preview = ok(s.preview());
    // `- …TargetDirectory: (delete[retain])` then `[id=local:…/set_01]`
    expect(preview.stdout).toMatch(/\(delete\[retain\]\)\s*\n\s*\[id=local:[^\n]*set_01\]/);
    ok(s.up());
    expect(readFileSync(join(out.scratch.cacheDirs.set_01!, 'graphs.pt'), 'utf8')).toBe('cached');
  });

  it('several environments: adding, changing and removing one touches only it, its kernel with it', () => {
    const base = ['alpha==2.0', 'beta==0.1'];
    const timed = <T>(f: () => T): [T, number] => {
      const t0 = performance.now();
      const r = f();
      return [r, (performance.now() - t0) / 1000];
    };
    const [, previewOne] = timed(() => ok(s.preview()));
    // adding two: only they (and the kernel of one) are created; cpu-e2e is not touched
    const three = [
      { name: 'cpu-e2e-b', pip: ['gamma==3.0'], kernel: { displayName: 'KD-GAT (b)' } },
      { name: 'cpu-e2e-c', pip: ['beta==0.1'] },
    ];
    s.setConfig(localConfig(root, wheels, base, ['hcrl_sa'], three));
    const [added, previewThree] = timed(() => ok(s.preview()));
    // `<op> <name>` once per name (an environment component and its build share one)
    const touched = (text: string) => [
      ...new Set(
        [
          ...text.matchAll(
            /^\s*(?:\+-|[+~-])\s*[\w:/-]+:\s*\((create|update|delete|replace|create-replacement|delete-replaced)\)\s*\n(?:\s*\[id=[^\]]*\]\s*\n)?\s*\[urn=[^\]]*::([^\]]+)\]/gm,
          ),
        ].map((m) => `${m[1]} ${m[2]}`),
      ),
    ];
    expect(touched(added.stdout).sort()).toEqual(
      [
        'create site-env-cpu-e2e-b',
        'create site-env-cpu-e2e-c',
        'create site-kernel-cpu-e2e-b',
        'create site-kernel-cpu-e2e-b-dir',
        'create site-kernel-cpu-e2e-b-kernel.json',
        'create site-kernel-cpu-e2e-b-kernel.sh',
      ].sort(),
    );
    expect(added.stdout).toContain('name: cpu-e2e-b\\ndependencies:');
    const [, upThree] = timed(() => ok(s.up()));
    out = s.outputs();
    expect(out.environments.map((e) => e.name)).toEqual(['cpu-e2e', 'cpu-e2e-b', 'cpu-e2e-c']);
    const [a, b, c] = out.environments;
    const version = (prefix: string, pkg: string) =>
      execFileSync(join(prefix, 'bin', 'python'), ['-c', `import ${pkg}; print(${pkg}.__version__)`], {
        encoding: 'utf8',
      }).trim();
    expect(version(b!.prefix, 'gamma')).toBe('3.0');
    expect(version(c!.prefix, 'beta')).toBe('0.1');
    const kernelJson = join(root, 'kernels', 'cpu-e2e-b', 'kernel.json');
    expect(JSON.parse(readFileSync(kernelJson, 'utf8'))).toMatchObject({ display_name: 'KD-GAT (b)' });
    expect(readFileSync(join(root, 'kernels', 'cpu-e2e-b', 'kernel.sh'), 'utf8')).toContain(b!.lockHash);
    ok(s.up(['--expect-no-changes']));
    const [, previewThreeUnchanged] = timed(() => ok(s.preview()));

    // changing one: its package lines, its rebuild; the others untouched
    const lockA = readFileSync(a!.lockPath, 'utf8');
    const lockC = readFileSync(c!.lockPath, 'utf8');
    three[0]!.pip = ['alpha==1.0'];
    s.setConfig(localConfig(root, wheels, base, ['hcrl_sa'], three));
    const changed = ok(s.preview());
    const changedTouched = touched(changed.stdout);
    expect(changedTouched.some((t) => t.endsWith(' site-env-cpu-e2e-b'))).toBe(true);
    expect(changedTouched.filter((t) => /site-env-cpu-e2e(-c)?$/.test(t))).toEqual([]);
    expect(changed.stdout).toMatch(/^\s*-\s.*gamma==3\.0/m);
    expect(changed.stdout).toMatch(/^\s*\+\s.*alpha==1\.0/m);
    ok(s.up());
    expect(version(b!.prefix, 'alpha')).toBe('1.0');
    expect(readFileSync(a!.lockPath, 'utf8')).toBe(lockA);
    expect(readFileSync(c!.lockPath, 'utf8')).toBe(lockC);
    // the kernel follows its environment's new lock
    const bNow = s.outputs().environments[1]!;
    expect(readFileSync(join(root, 'kernels', 'cpu-e2e-b', 'kernel.sh'), 'utf8')).toContain(bNow.lockHash);

    // removing one: the preview says what goes (the environment and its kernel), up removes only it
    s.setConfig(localConfig(root, wheels, base, ['hcrl_sa'], [three[1]!]));
    const removed = ok(s.preview());
    expect(touched(removed.stdout).sort()).toEqual(
      [
        'delete site-env-cpu-e2e-b',
        'delete site-kernel-cpu-e2e-b',
        'delete site-kernel-cpu-e2e-b-dir',
        'delete site-kernel-cpu-e2e-b-kernel.json',
        'delete site-kernel-cpu-e2e-b-kernel.sh',
      ].sort(),
    );
    ok(s.up());
    expect(existsSync(b!.prefix)).toBe(false);
    expect(existsSync(join(root, 'kernels', 'cpu-e2e-b'))).toBe(false);
    expect(version(a!.prefix, 'alpha')).toBe('2.0');
    expect(version(c!.prefix, 'beta')).toBe('0.1');
    out = s.outputs();
    expect(out.environments.map((e) => e.name)).toEqual(['cpu-e2e', 'cpu-e2e-c']);
    // what the note reports: one figure each, on this machine (bench/pulumi-preview repeats them)
    process.stdout.write(
      `# preview --diff: one environment ${previewOne.toFixed(1)} s, three unchanged ${previewThreeUnchanged.toFixed(1)} s, ` +
        `adding two ${previewThree.toFixed(1)} s; up adding two (venvs + kernel) ${upThree.toFixed(1)} s\n`,
    );
  });

  it('destroy removes the environment and the scripts, and keeps cached data', () => {
    writeFileSync(join(out.scratch.cacheDirs.hcrl_sa!, 'graphs.pt'), 'cached');
    const r = ok(s.destroy());
    expect(r.stdout).toMatch(/site-scratch-cache-hcrl_sa deleted \([^)]*\)\[retain\]/);
    expect(existsSync(out.environments[0]!.prefix)).toBe(false);
    for (const key of ['stageData', 'epilog', 'trainGpu', 'preprocessGpu'] as const)
      expect(existsSync(out.scripts[key])).toBe(false);
    // The job library stays (retained): jobs rendered for it may still be queued.
    expect(r.stdout).toMatch(/site-scripts-job-library deleted \([^)]*\)\[retain\]/);
    expect(readFileSync(out.scripts.jobLibrary!.path, 'utf8')).toBe(JOB_LIBRARY.text);
    expect(readFileSync(join(out.scratch.cacheDirs.hcrl_sa!, 'graphs.pt'), 'utf8')).toBe('cached');
    expect(existsSync(join(out.scratch.root, 'README.md'))).toBe(true);
  });
});
