// A real OpenSSH server on a loopback port, with its own config, host key and one client key.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as tcpConnect, createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface LoopbackSshd {
  host: string;
  port: number;
  user: string;
  /** `ssh-ed25519 AAAA…` of the server. */
  hostKey: string;
  /** OpenSSH private key text of the authorized client. */
  clientKey: string;
  stop(): void;
}

function keygen(path: string): void {
  const r = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'kdgat-e2e', '-f', path]);
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr}`);
}

/** A fresh ed25519 public key line, for the wrong-host-key test. */
export function strayHostKey(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-stray-'));
  keygen(join(dir, 'k'));
  const line = readFileSync(join(dir, 'k.pub'), 'utf8').split(' ').slice(0, 2).join(' ');
  rmSync(dir, { recursive: true, force: true });
  return line;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

async function waitForPort(port: number, child: ChildProcess, log: () => string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`sshd exited with ${child.exitCode}: ${log()}`);
    const open = await new Promise<boolean>((resolve) => {
      const s = tcpConnect(port, '127.0.0.1', () => (s.end(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`sshd did not listen on 127.0.0.1:${port}: ${log()}`);
}

/**
 * `env`: variables sshd sets in every session (`SetEnv`), as a site's login nodes set their own,
 * e.g. MODULEPATH for the site's module tree. Values are single words.
 */
export async function startSshd(opts: { env?: Record<string, string> } = {}): Promise<LoopbackSshd> {
  const dir = mkdtempSync(join(tmpdir(), 'kdgat-sshd-'));
  keygen(join(dir, 'host_ed25519'));
  keygen(join(dir, 'client'));
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'client.pub')), { mode: 0o600 });
  const port = await freePort();
  writeFileSync(
    join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(dir, 'host_ed25519')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PubkeyAuthentication yes',
      'PermitRootLogin prohibit-password',
      'UsePAM no',
      'StrictModes no',
      'MaxStartups 50',
      'MaxSessions 50',
      ...Object.entries(opts.env ?? {}).map(([k, v]) => `SetEnv ${k}=${v}`),
      '',
    ].join('\n'),
  );
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 }); // privilege separation directory
  let log = '';
  const child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', join(dir, 'sshd_config')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (log += d));
  await waitForPort(port, child, () => log);
  return {
    host: '127.0.0.1',
    port,
    user: userInfo().username,
    hostKey: readFileSync(join(dir, 'host_ed25519.pub'), 'utf8').split(' ').slice(0, 2).join(' '),
    clientKey: readFileSync(join(dir, 'client'), 'utf8'),
    stop: () => {
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
