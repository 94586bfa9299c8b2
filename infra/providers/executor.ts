// Where provider commands run: on this machine, or on a login node through the system `ssh`.
// Both take an argv array; nothing is ever passed through a local shell, and the remote shell
// only sees argv joined with the one quoting helper of @kdgat/slurm-templates.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Connection as ConfigConnection } from '@kdgat/config';
import { shq } from '@kdgat/slurm-templates';

/** The connection as stored in resource inputs (privateKey is a Pulumi secret upstream). */
export type Connection = ConfigConnection;
type SshConnection = Extract<Connection, { kind: 'ssh' }>;

export interface RunOptions {
  /** Text written to the command's stdin. */
  input?: string;
  /** Wall-clock bound; the command is killed (TERM, then KILL) when it runs past it. */
  timeoutSeconds: number;
}

export interface RunResult {
  code: number;
  /** Signal that ended the command, if any. */
  signal?: string;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface Executor {
  /** Human-readable target, used in error messages (`local`, `user@host:port`). */
  readonly target: string;
  run(argv: readonly string[], options: RunOptions): Promise<RunResult>;
}

/** Error raised when a command fails; names the target, the command and the tail of its output. */
export class CommandFailedError extends Error {
  readonly result: RunResult;
  constructor(target: string, what: string, result: RunResult) {
    const tail = (result.stderr.trim() || result.stdout.trim()).split('\n').slice(-15).join('\n');
    const why = result.timedOut
      ? 'timed out'
      : result.signal
        ? `was killed by ${result.signal}`
        : `exited with status ${result.code}`;
    super(`${what} on ${target} ${why}${tail ? `:\n${tail}` : ''}`);
    this.name = 'CommandFailedError';
    this.result = result;
  }
}

/** Runs argv and throws CommandFailedError on a non-zero status; returns stdout. */
export async function runChecked(
  executor: Executor,
  argv: readonly string[],
  options: RunOptions & { what?: string },
): Promise<string> {
  const result = await executor.run(argv, options);
  if (result.code !== 0 || result.timedOut) {
    throw new CommandFailedError(executor.target, options.what ?? `\`${argv.join(' ')}\``, result);
  }
  return result.stdout;
}

function spawnBounded(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      killTimer = setTimeout(() => child.kill('SIGKILL'), 5000);
    }, options.timeoutSeconds * 1000);
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`could not start \`${command}\`: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      resolve({ code: code ?? 128, stdout, stderr, timedOut, ...(signal ? { signal } : {}) });
    });
    child.stdin.on('error', () => undefined); // a command that does not read stdin closes it early
    child.stdin.end(options.input ?? '');
  });
}

export function localExecutor(): Executor {
  return {
    target: 'local',
    run: (argv, options) => {
      const [command, ...args] = argv;
      if (!command) throw new Error('empty command');
      return spawnBounded(command, args, options);
    },
  };
}

/** The `ssh` argv (without the remote command) for a connection, given the files it needs. */
export function sshArgs(
  connection: SshConnection,
  files: { knownHosts: string; identity?: string },
): string[] {
  const args = ['-p', String(connection.port), ...commonOptions(files)];
  if (connection.proxy) {
    // Not `-J`: options given on the command line do not reach the jump connection, so its host
    // key would be checked against ~/.ssh/known_hosts. This ProxyCommand pins it too.
    const p = connection.proxy;
    const jump = ['ssh', '-p', String(p.port), '-l', p.user, ...commonOptions(files), '-W', '%h:%p', p.host];
    args.push('-o', `ProxyCommand=${jump.map((a) => (a === '%h:%p' ? a : shq(a))).join(' ')}`);
  }
  args.push('-l', connection.user, connection.host);
  return args;
}

/** Options of every ssh hop: no prompts, only the pinned host keys, the given identity. */
function commonOptions(files: { knownHosts: string; identity?: string }): string[] {
  const args = [
    '-o',
    'BatchMode=yes',
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    `UserKnownHostsFile=${files.knownHosts}`,
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    '-o',
    'ConnectTimeout=20',
    '-o',
    'LogLevel=ERROR',
  ];
  if (files.identity) args.push('-o', 'IdentitiesOnly=yes', '-i', files.identity);
  return args;
}

/** known_hosts line pinning the host key for host:port (the bracket form is what ssh looks up for port != 22). */
export function knownHostsLine(host: string, port: number, hostKey: string): string {
  const name = port === 22 ? host : `[${host}]:${port}`;
  return `${name} ${hostKey.trim()}\n`;
}

export function sshExecutor(connection: SshConnection): Executor {
  const target = `${connection.user}@${connection.host}:${connection.port}`;
  return {
    target,
    run: async (argv, options) => {
      const dir = mkdtempSync(join(tmpdir(), 'kdgat-ssh-'));
      try {
        const knownHosts = join(dir, 'known_hosts');
        const pins = [knownHostsLine(connection.host, connection.port, connection.hostKey)];
        if (connection.proxy)
          pins.push(knownHostsLine(connection.proxy.host, connection.proxy.port, connection.proxy.hostKey));
        writeFileSync(knownHosts, pins.join(''), {
          mode: 0o600,
        });
        let identity = connection.privateKeyPath;
        if (connection.privateKey) {
          identity = join(dir, 'id');
          const key = connection.privateKey.endsWith('\n')
            ? connection.privateKey
            : `${connection.privateKey}\n`;
          writeFileSync(identity, key, { mode: 0o600 });
        }
        // `timeout` bounds the remote side too: killing the local ssh alone leaves the remote command running.
        const remote = ['timeout', '-k', '10', String(options.timeoutSeconds), ...argv]
          .map((a) => shq(a))
          .join(' ');
        const result = await spawnBounded(
          'ssh',
          [...sshArgs(connection, { knownHosts, identity }), '--', remote],
          {
            ...options,
            timeoutSeconds: options.timeoutSeconds + 30,
          },
        );
        if (
          result.code === 255 &&
          /host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED/i.test(result.stderr)
        ) {
          throw new Error(
            `ssh to ${target} refused: the server's host key does not match the pinned hostKey of the cluster profile ` +
              `(expected ${connection.hostKey.trim().split(/\s+/)[0]} key ${connection.hostKey.trim().slice(0, 40)}…). ` +
              `Check the key with the site's published fingerprints before changing hostKey.`,
          );
        }
        if (result.code === 255) {
          throw new Error(
            `ssh to ${target} failed (status 255): ${result.stderr.trim().split('\n').slice(-5).join('\n')}`,
          );
        }
        // 124/137: the remote `timeout` fired.
        return result.code === 124 || result.code === 137 ? { ...result, timedOut: true } : result;
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

export function executorFor(connection: Connection): Executor {
  return connection.kind === 'local' ? localExecutor() : sshExecutor(connection);
}
