// Runs the real Pulumi CLI on this project in a throwaway project directory: a temp file backend,
// a temp Pulumi.yaml whose `main` points at infra/index.ts, and a stack config file we write.
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join, relative } from 'node:path';
import { StackOutputsSchema, type StackOutputs } from '@kdgat/config';
import { parse, stringify } from 'yaml';

const infraDir = new URL('../../', import.meta.url).pathname.replace(/\/$/, '');
const repoRoot = join(infraDir, '..');

/** Directory holding the `pulumi` CLI: PATH first, then the repository tool cache. */
export function pulumiBinDir(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'pulumi')) && existsSync(join(dir, 'pulumi-language-nodejs'))) return dir;
  }
  const cache = join(process.env.HPC_TOOLS ?? join(homedir(), '.cache', 'kdgat-hpc'), 'pulumi');
  const versions = existsSync(cache) ? readdirSync(cache).sort().reverse() : [];
  for (const v of versions) {
    const dir = join(cache, v, 'bin');
    if (existsSync(join(dir, 'pulumi'))) return dir;
  }
  throw new Error(
    'the Pulumi CLI (pulumi and pulumi-language-nodejs) is not on PATH nor in the tool cache: run scripts/bootstrap.sh first',
  );
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout and stderr together, for assertions on what the user sees. */
  output: string;
}

export class TempStack {
  readonly dir: string;
  readonly backend: string;
  readonly stack: string;
  readonly env: NodeJS.ProcessEnv;

  constructor(stack: string, config: Record<string, unknown>) {
    this.stack = stack;
    this.dir = mkdtempSync(join(tmpdir(), 'kdgat-pulumi-'));
    this.backend = join(this.dir, 'backend');
    mkdirSync(this.backend);
    const project = parse(readFileSync(join(infraDir, 'Pulumi.yaml'), 'utf8'));
    project.main = relative(this.dir, join(infraDir, 'index.ts'));
    writeFileSync(join(this.dir, 'Pulumi.yaml'), stringify(project));
    symlinkSync(join(repoRoot, 'node_modules'), join(this.dir, 'node_modules'));
    const bin = pulumiBinDir();
    this.env = {
      ...process.env,
      PATH: `${bin}${delimiter}${process.env.PATH}`,
      PULUMI_BACKEND_URL: `file://${this.backend}`,
      PULUMI_CONFIG_PASSPHRASE: 'kdgat-e2e',
      PULUMI_HOME: join(this.dir, '.pulumi-home'),
      PULUMI_SKIP_UPDATE_CHECK: 'true',
      PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
      PULUMI_SKIP_CONFIRMATIONS: 'true',
      NO_COLOR: '1',
    };
    this.cli(['stack', 'init', stack], { check: true });
    this.setConfig(config);
  }

  /** Replaces the stack's config (keeping the secrets salt `stack init` wrote). */
  setConfig(config: Record<string, unknown>): void {
    const file = join(this.dir, `Pulumi.${this.stack}.yaml`);
    const current = existsSync(file) ? (parse(readFileSync(file, 'utf8')) ?? {}) : {};
    const secrets = Object.fromEntries(
      Object.entries((current.config ?? {}) as Record<string, unknown>).filter(
        ([, v]) => typeof v === 'object' && v !== null && 'secure' in v,
      ),
    );
    const namespaced = Object.fromEntries(Object.entries(config).map(([k, v]) => [`kdgat-hpc:${k}`, v]));
    writeFileSync(file, stringify({ ...current, config: { ...namespaced, ...secrets } }));
  }

  cli(args: string[], opts: { check?: boolean; input?: string } = {}): CliResult {
    const r = spawnSync('pulumi', [...args, '--non-interactive'], {
      cwd: this.dir,
      env: this.env,
      input: opts.input,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    const res = {
      code: r.status ?? 1,
      stdout: r.stdout,
      stderr: r.stderr,
      output: `${r.stdout}\n${r.stderr}`,
    };
    if (opts.check && res.code !== 0)
      throw new Error(`pulumi ${args.join(' ')} failed (${res.code}):\n${res.output}`);
    return res;
  }

  /** `bin/pulumi-stack.sh <verb>` (what `nx run infra:<verb>` runs) on this project and stack. */
  script(verb: 'preview' | 'up' | 'refresh' | 'destroy', extra: string[] = []): CliResult {
    const r = spawnSync(
      'bash',
      [join(infraDir, 'bin', 'pulumi-stack.sh'), verb, '--stack', this.stack, ...extra],
      {
        cwd: this.dir,
        env: { ...this.env, HPC_INFRA_DIR: this.dir },
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    return { code: r.status ?? 1, stdout: r.stdout, stderr: r.stderr, output: `${r.stdout}\n${r.stderr}` };
  }

  setSecret(key: string, value: string): void {
    this.cli(['config', 'set', '--secret', `kdgat-hpc:${key}`, '--stack', this.stack], {
      check: true,
      input: value,
    });
  }

  /** `pulumi up`, straight to the update: the tests look at previews with preview(). */
  up(extra: string[] = []): CliResult {
    return this.cli(['up', '--yes', '--skip-preview', '--diff', '--stack', this.stack, ...extra]);
  }
  preview(extra: string[] = []): CliResult {
    return this.cli(['preview', '--diff', '--stack', this.stack, ...extra]);
  }
  refresh(extra: string[] = []): CliResult {
    return this.cli(['refresh', '--yes', '--diff', '--stack', this.stack, ...extra]);
  }
  destroy(extra: string[] = []): CliResult {
    return this.cli(['destroy', '--yes', '--stack', this.stack, ...extra]);
  }
  /**
   * `pulumi stack output --json`, read as the runner reads it (`StackOutputsSchema` of @kdgat/config,
   * docs/CONTRACTS.md "Stack outputs"): outputs the runner could not read fail here, naming the field.
   */
  outputs(): StackOutputs {
    const text = this.cli(['stack', 'output', '--json', '--stack', this.stack], { check: true }).stdout;
    const parsed = StackOutputsSchema.safeParse(JSON.parse(text));
    if (!parsed.success) {
      const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(top)'}: ${i.message}`);
      throw new Error(
        `the stack outputs do not parse as the runner reads them:\n${problems.join('\n')}\n${text}`,
      );
    }
    return parsed.data;
  }

  /** Every file of the backend (the state and its backups), for secret checks. */
  stateText(): string {
    const walk = (d: string): string[] =>
      readdirSync(d, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)],
      );
    return walk(this.backend)
      .map((f) => readFileSync(f, 'latin1'))
      .join('\n');
  }

  /** Starts `pulumi up` detached (own process group), for the interruption test. */
  startUp(): { pid: number; done: Promise<number> } {
    const child = spawn('pulumi', ['up', '--yes', '--stack', this.stack, '--non-interactive'], {
      cwd: this.dir,
      env: this.env,
      detached: true,
      stdio: 'ignore',
    });
    return {
      pid: child.pid!,
      done: new Promise((resolve) => child.on('exit', (code) => resolve(code ?? 137))),
    };
  }
}

/** Fails with the CLI output when a command did not exit 0. */
export function ok(r: CliResult): CliResult {
  if (r.code !== 0) throw new Error(`pulumi exited ${r.code}:\n${r.output}`);
  return r;
}

export function pulumiVersion(): string {
  return spawnSync(join(pulumiBinDir(), 'pulumi'), ['version'], { encoding: 'utf8' }).stdout.trim();
}
