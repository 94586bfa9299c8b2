// Where commands run: on this machine, or on a login node through the system `ssh`. Infra's
// providers and the runner use the same executors: argv arrays only, nothing passed through a local
// shell, the remote shell sees argv joined with the one quoting helper of @kdgat/slurm-templates,
// host keys pinned from the cluster profile, and every command bounded in time on both sides.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Connection as ConfigConnection } from '@kdgat/config';
import { shq } from '@kdgat/slurm-templates';

/** The connection as stored in resource inputs (privateKey is a Pulumi secret upstream). */
export type Connection = ConfigConnection;
export type SshConnection = Extract<Connection, { kind: 'ssh' }>;

export interface RunOptions {
  /** Bytes or text written to the command's stdin. */
  input?: string | Buffer;
  /** Wall-clock bound; the command is killed (TERM, then KILL) when it runs past it. */
  timeoutSeconds: number;
  /** Directory the command runs in (on the target). */
  cwd?: string;
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

/** How an interactive command ended. */
export interface InteractiveResult {
  code: number;
  /** Signal that ended the command, if any. */
  signal?: string;
}

/** An executor that holds a connection open (one SSH master) until it is closed. */
export interface Session extends Executor {
  readonly kind: 'local' | 'ssh';
  /**
   * Runs argv on the target with this process's terminal (stdin, stdout and stderr inherited); over
   * ssh with `-t`, so the remote command has a terminal of its own. Not bounded in time: what it
   * runs bounds itself (`runner shell`: the allocation's time limit). Ctrl-C is the command's, not
   * this process's, while it runs.
   */
  interactive(argv: readonly string[]): Promise<InteractiveResult>;
  /** Commands run through this session so far (remote calls, for the bench and the note). */
  readonly calls: number;
  /**
   * `ssh` and its options through this session, without the host (what rsync's `-e` takes), and
   * the host to name after it; undefined for a local session.
   */
  remoteShell(): { argv: string[]; host: string } | undefined;
  close(): void;
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

/** The connection itself failed (ssh status 255): nothing ran on the target. */
export class ConnectionError extends Error {
  readonly target: string;
  constructor(target: string, message: string) {
    super(message);
    this.name = 'ConnectionError';
    this.target = target;
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
    const child = spawn(command, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(options.cwd ? { cwd: options.cwd } : {}),
    });
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

/** Runs a command with this process's terminal; SIGINT and SIGQUIT go to it, not to this process. */
function spawnInteractive(command: string, args: readonly string[]): Promise<InteractiveResult> {
  return new Promise((resolve, reject) => {
    // The terminal sends Ctrl-C to its whole foreground group: the command decides what it means
    // (salloc cancels a pending allocation), and this process waits to see how it ended.
    const ignore = () => undefined;
    process.on('SIGINT', ignore);
    process.on('SIGQUIT', ignore);
    const done = () => {
      process.off('SIGINT', ignore);
      process.off('SIGQUIT', ignore);
    };
    const child = spawn(command, args, { stdio: 'inherit' });
    child.on('error', (err) => {
      done();
      reject(new Error(`could not start \`${command}\`: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      done();
      resolve({ code: code ?? 128, ...(signal ? { signal } : {}) });
    });
  });
}

export function localExecutor(): Session {
  let calls = 0;
  return {
    kind: 'local',
    target: 'local',
    get calls() {
      return calls;
    },
    remoteShell: () => undefined,
    close: () => undefined,
    interactive: (argv) => {
      const [command, ...args] = argv;
      if (!command) throw new Error('empty command');
      calls++;
      return spawnInteractive(command, args);
    },
    run: (argv, options) => {
      const [command, ...args] = argv;
      if (!command) throw new Error('empty command');
      calls++;
      return spawnBounded(command, args, options);
    },
  };
}

/** The `ssh` argv (without the remote command) for a connection, given the files it needs. */
export function sshArgs(
  connection: SshConnection,
  files: { knownHosts: string; identity?: string; controlPath?: string },
): string[] {
  const args = ['-p', String(connection.port), ...commonOptions(files)];
  if (files.controlPath) {
    // One master: every later command rides on it (no new handshake, no new login). ControlPersist
    // bounds a master whose session ended without closing it (a killed runner), and keeps a shared
    // one (sharedControlPath) for the next process that asks.
    args.push(
      '-o',
      'ControlMaster=auto',
      '-o',
      `ControlPath=${files.controlPath}`,
      '-o',
      'ControlPersist=120',
    );
  }
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

/**
 * Options of every ssh hop: no prompts, only the pinned host keys, the given identity, and nothing
 * forwarded. A login node is shared: with the agent forwarded, anyone who is root there (or gets
 * the user's uid) can use this machine's keys while the connection lasts, and an X11 display the
 * same. No command of ours wants a port forwarded either (`runner tensorboard --serve` serves the
 * local copy on this machine; `runner shell` is a terminal only), so ClearAllForwardings drops any
 * LocalForward/RemoteForward/DynamicForward that the user's ~/.ssh/config gives the host.
 */
export const NO_FORWARDING = [
  '-o',
  'ForwardAgent=no',
  '-o',
  'ForwardX11=no',
  '-o',
  'ClearAllForwardings=yes',
] as const;

function commonOptions(files: { knownHosts: string; identity?: string }): string[] {
  const args = [
    ...NO_FORWARDING,
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
    'ServerAliveInterval=15',
    '-o',
    'ServerAliveCountMax=4',
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

/** The remote shell's command line: `cd DIR &&` when asked, then `timeout` around argv. */
export function remoteCommandLine(
  argv: readonly string[],
  options: Pick<RunOptions, 'cwd' | 'timeoutSeconds'>,
): string {
  // `timeout` bounds the remote side too: killing the local ssh alone leaves the remote command running.
  const bounded = ['timeout', '-k', '10', String(options.timeoutSeconds), ...argv]
    .map((a) => shq(a))
    .join(' ');
  return options.cwd ? `cd ${shq(options.cwd)} && ${bounded}` : bounded;
}

/** The files ssh needs for a connection (pinned host keys, the identity), in a private directory. */
function sshFiles(connection: SshConnection): { dir: string; knownHosts: string; identity?: string } {
  const dir = mkdtempSync(join(tmpdir(), 'hpc-ssh-'));
  const knownHosts = join(dir, 'known_hosts');
  const pins = [knownHostsLine(connection.host, connection.port, connection.hostKey)];
  if (connection.proxy)
    pins.push(knownHostsLine(connection.proxy.host, connection.proxy.port, connection.proxy.hostKey));
  writeFileSync(knownHosts, pins.join(''), { mode: 0o600 });
  let identity = connection.privateKeyPath;
  if (connection.privateKey) {
    identity = join(dir, 'id');
    const key = connection.privateKey.endsWith('\n') ? connection.privateKey : `${connection.privateKey}\n`;
    writeFileSync(identity, key, { mode: 0o600 });
  }
  return { dir, knownHosts, ...(identity ? { identity } : {}) };
}

function connectionFailure(connection: SshConnection, target: string, result: RunResult): Error | undefined {
  if (result.code !== 255) return undefined;
  if (/host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED/i.test(result.stderr)) {
    return new ConnectionError(
      target,
      `ssh to ${target} refused: the server's host key does not match the pinned hostKey of the cluster profile ` +
        `(expected ${connection.hostKey.trim().split(/\s+/)[0]} key ${connection.hostKey.trim().slice(0, 40)}…). ` +
        `Check the key with the site's published fingerprints before changing hostKey.`,
    );
  }
  return new ConnectionError(
    target,
    `ssh to ${target} failed (status 255): ${result.stderr.trim().split('\n').slice(-5).join('\n')}`,
  );
}

/**
 * The control socket of a master connection that separate processes share (infra's providers: a
 * `pulumi up` makes dozens of short calls, each otherwise a new handshake and login). It lies in a
 * directory of this user's alone and is named by everything that decides who is at the other end and
 * who logs in (host, port, user, pinned host keys, identity), so a changed pin or key never rides on
 * a master opened under the old one. Undefined when that directory is not this user's alone (0700):
 * every command then makes its own connection.
 */
export function sharedControlPath(connection: SshConnection): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const dir = join(tmpdir(), `kdgat-hpc-ssh-${uid}`);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return undefined;
  }
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o077) !== 0) return undefined;
  const identity = connection.privateKey
    ? createHash('sha256').update(connection.privateKey).digest('hex')
    : (connection.privateKeyPath ?? '');
  const who = [
    connection.user,
    connection.host,
    connection.port,
    connection.hostKey,
    connection.proxy ?? null,
  ];
  const name = createHash('sha256')
    .update(JSON.stringify([...who, identity]))
    .digest('hex');
  return join(dir, name.slice(0, 24));
}

/**
 * Which master connection an ssh session's commands ride: `session`, one that the first command
 * opens and every later command of the session rides on, until `close()`; `shared` (infra's
 * providers, many short calls in several processes), one that outlives them by ControlPersist,
 * shared by every process of this user's that reaches the same site as the same login
 * (sharedControlPath). Without one, each command makes its own connection.
 */
export type MasterConnection = 'session' | 'shared';

/** Commands on a login node over ssh, riding `opts.master` (MasterConnection) when given. */
export function sshExecutor(connection: SshConnection, opts: { master?: MasterConnection } = {}): Session {
  const target = `${connection.user}@${connection.host}:${connection.port}`;
  let calls = 0;
  let files: ReturnType<typeof sshFiles> | undefined;
  const multiplex = opts.master === 'session';
  const shared = opts.master === 'shared' ? sharedControlPath(connection) : undefined;
  const controlPathOf = (f: ReturnType<typeof sshFiles>) => (multiplex ? join(f.dir, 'master') : shared);
  const argsFor = (f: ReturnType<typeof sshFiles>) => {
    const controlPath = controlPathOf(f);
    return sshArgs(connection, { ...f, ...(controlPath ? { controlPath } : {}) });
  };
  return {
    kind: 'ssh',
    target,
    get calls() {
      return calls;
    },
    remoteShell() {
      files ??= sshFiles(connection);
      // sshArgs ends with the host; rsync names it itself (`host:path`).
      return { argv: ['ssh', ...argsFor(files).slice(0, -1)], host: connection.host };
    },
    close() {
      if (!files) return;
      if (multiplex)
        spawnSync('ssh', ['-o', `ControlPath=${join(files.dir, 'master')}`, '-O', 'exit', connection.host], {
          stdio: 'ignore',
          timeout: 10_000,
        });
      rmSync(files.dir, { recursive: true, force: true });
      files = undefined;
    },
    interactive: async (argv) => {
      const own = multiplex ? undefined : sshFiles(connection);
      if (multiplex) files ??= sshFiles(connection);
      const f = own ?? files!;
      calls++;
      try {
        // -t: a terminal on the target too; no `timeout` around it (see Session.interactive).
        const result = await spawnInteractive('ssh', [
          '-t',
          ...argsFor(f),
          '--',
          argv.map((a) => shq(a)).join(' '),
        ]);
        if (result.code === 255)
          throw new ConnectionError(target, `ssh to ${target} failed (status 255): its message is above`);
        return result;
      } finally {
        if (own) rmSync(own.dir, { recursive: true, force: true });
      }
    },
    run: async (argv, options) => {
      const own = multiplex ? undefined : sshFiles(connection);
      if (multiplex) files ??= sshFiles(connection);
      const f = own ?? files!;
      calls++;
      try {
        const result = await spawnBounded('ssh', [...argsFor(f), '--', remoteCommandLine(argv, options)], {
          ...(options.input !== undefined ? { input: options.input } : {}),
          timeoutSeconds: options.timeoutSeconds + 30,
        });
        const failure = connectionFailure(connection, target, result);
        if (failure) throw failure;
        // 124/137: the remote `timeout` fired.
        return result.code === 124 || result.code === 137 ? { ...result, timedOut: true } : result;
      } finally {
        if (own) rmSync(own.dir, { recursive: true, force: true });
      }
    },
  };
}

export function executorFor(connection: Connection, opts: { master?: MasterConnection } = {}): Session {
  return connection.kind === 'local' ? localExecutor() : sshExecutor(connection, opts);
}
