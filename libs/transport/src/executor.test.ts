import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConnectionError,
  knownHostsLine,
  localExecutor,
  remoteCommandLine,
  runChecked,
  sharedControlPath,
  sshArgs,
  sshExecutor,
} from './executor.ts';

describe('local executor', () => {
  const ex = localExecutor();

  it('passes argv without a shell: $(…) and quotes arrive literally', async () => {
    const r = await ex.run(['printf', '%s|', '$(echo hi)', "it's", 'a b'], { timeoutSeconds: 10 });
    expect(r).toMatchObject({ code: 0, stdout: "$(echo hi)|it's|a b|", timedOut: false });
  });

  it('feeds stdin', async () => {
    expect(await runChecked(ex, ['cat'], { input: 'line one\nline two\n', timeoutSeconds: 10 })).toBe(
      'line one\nline two\n',
    );
  });

  it('kills a command that runs past its timeout and says so', async () => {
    const started = Date.now();
    const r = await ex.run(['sleep', '30'], { timeoutSeconds: 1 });
    expect(r.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(10_000);
    await expect(
      runChecked(ex, ['sleep', '30'], { timeoutSeconds: 1, what: 'building environment x' }),
    ).rejects.toThrow(/building environment x on local timed out/);
  });

  it('names the command, the status and the output tail on failure', async () => {
    await expect(
      runChecked(ex, ['sh', '-c', 'echo boom >&2; exit 7'], { timeoutSeconds: 10 }),
    ).rejects.toThrow(/exited with status 7:\nboom/);
  });

  it('reports a missing program clearly', async () => {
    await expect(ex.run(['/nonexistent/conda'], { timeoutSeconds: 5 })).rejects.toThrow(
      /could not start `\/nonexistent\/conda`/,
    );
  });
});

describe('ssh invocation', () => {
  const conn = {
    kind: 'ssh' as const,
    host: 'pitzer.osc.edu',
    port: 2222,
    user: 'alice',
    hostKey: 'ssh-ed25519 AAAAkey',
  };

  it('pins the host key strictly and never prompts', () => {
    const args = sshArgs(conn, { knownHosts: '/tmp/kh', identity: '/tmp/id' });
    expect(args.join(' ')).toContain(
      '-o StrictHostKeyChecking=yes -o UserKnownHostsFile=/tmp/kh -o GlobalKnownHostsFile=/dev/null',
    );
    expect(args).toContain('BatchMode=yes');
    expect(args.slice(-3)).toEqual(['-l', 'alice', 'pitzer.osc.edu']);
    expect(args.some((a) => a.startsWith('ProxyCommand='))).toBe(false);
    const viaGateway = sshArgs(
      { ...conn, proxy: { host: 'gw.osc.edu', port: 22, user: 'bob', hostKey: 'ssh-ed25519 BBBB' } },
      { knownHosts: '/tmp/kh' },
    );
    // the jump hop is pinned to the same known_hosts file and never prompts either
    expect(viaGateway).toContain(
      'ProxyCommand=ssh -p 22 -l bob -o ForwardAgent=no -o ForwardX11=no -o ClearAllForwardings=yes ' +
        '-o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=/tmp/kh ' +
        '-o GlobalKnownHostsFile=/dev/null -o ConnectTimeout=20 -o ServerAliveInterval=15 -o ServerAliveCountMax=4 ' +
        '-o LogLevel=ERROR -W %h:%p gw.osc.edu',
    );
  });

  it("forwards nothing: no agent, no X11, no port forward from the user's ssh config, on every hop", () => {
    const proxy = { host: 'gw.osc.edu', port: 22, user: 'bob', hostKey: 'ssh-ed25519 BBBB' };
    for (const c of [conn, { ...conn, proxy }]) {
      const args = sshArgs(c, { knownHosts: '/tmp/kh', identity: '/tmp/id', controlPath: '/tmp/s/master' });
      const options = args.flatMap((a, i) => (args[i - 1] === '-o' ? [a] : []));
      expect(options).toEqual(
        expect.arrayContaining(['ForwardAgent=no', 'ForwardX11=no', 'ClearAllForwardings=yes']),
      );
      // Nothing turns any of it back on: no -A, -X, -Y, -L, -R, -D anywhere in the argv.
      expect(args.filter((a) => /^-[AXYLRD]$/.test(a))).toEqual([]);
      expect(options.filter((o) => /^(ForwardAgent|ForwardX11|ClearAllForwardings)=/.test(o))).toHaveLength(
        3,
      );
    }
    const jump = sshArgs({ ...conn, proxy }, { knownHosts: '/tmp/kh' }).find((a) =>
      a.startsWith('ProxyCommand='),
    )!;
    expect(jump).toContain('-o ForwardAgent=no -o ForwardX11=no -o ClearAllForwardings=yes');
  });

  it('rides one master per session when multiplexing, bounded by ControlPersist', () => {
    const args = sshArgs(conn, { knownHosts: '/tmp/kh', controlPath: '/tmp/s/master' }).join(' ');
    expect(args).toContain('-o ControlMaster=auto -o ControlPath=/tmp/s/master -o ControlPersist=120');
    expect(sshArgs(conn, { knownHosts: '/tmp/kh' }).join(' ')).not.toContain('ControlMaster');
  });

  it("shares a master across processes under a name of who is at the other end and who logs in, in a directory of this user's alone", () => {
    const tmp = mkdtempSync(join(tmpdir(), 'kdgat-shared-master-'));
    const saved = process.env['TMPDIR'];
    process.env['TMPDIR'] = tmp;
    try {
      const path = sharedControlPath(conn)!;
      expect(path).toMatch(new RegExp(`^${tmp}/kdgat-hpc-ssh-\\d+/[0-9a-f]{24}$`));
      expect(statSync(join(path, '..')).mode & 0o777).toBe(0o700);
      expect(sharedControlPath({ ...conn })).toBe(path);
      // Another pinned key, port, user or identity never rides on this master.
      for (const other of [
        { ...conn, hostKey: 'ssh-ed25519 AAAAother' },
        { ...conn, port: 22 },
        { ...conn, user: 'bob' },
        { ...conn, privateKeyPath: '/home/alice/.ssh/id_other' },
        { ...conn, privateKey: 'another key' },
        { ...conn, proxy: { host: 'gw', port: 22, user: 'alice', hostKey: 'ssh-ed25519 BBBB' } },
      ])
        expect(sharedControlPath(other), JSON.stringify(other)).not.toBe(path);
      // A directory others can enter is not used: every command then makes its own connection.
      const loose = mkdtempSync(join(tmpdir(), 'kdgat-shared-master-loose-'));
      process.env['TMPDIR'] = loose;
      mkdirSync(join(loose, `kdgat-hpc-ssh-${process.getuid!()}`), { mode: 0o755 });
      expect(sharedControlPath(conn)).toBeUndefined();
      rmSync(loose, { recursive: true });
    } finally {
      if (saved === undefined) delete process.env['TMPDIR'];
      else process.env['TMPDIR'] = saved;
      rmSync(tmp, { recursive: true });
    }
  });

  it('quotes the remote command once, bounds it with timeout and enters its directory first', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kdgat-remote dir-'));
    const line = remoteCommandLine(['sh', '-c', 'printf "%s|" "$PWD" "$@"', 'sh', "a b'c", '$(echo no)'], {
      timeoutSeconds: 5,
      cwd: dir,
    });
    expect(line).toMatch(/ && timeout -k 10 5 sh -c /);
    // What the login shell on the far side does with the line: exactly these words, in that directory.
    const r = spawnSync('bash', ['-c', line], { encoding: 'utf8' });
    expect(r.stdout).toBe(`${dir}|a b'c|$(echo no)|`);
    rmSync(dir, { recursive: true });
  });

  it('writes the known_hosts line in the form ssh looks up for the port', () => {
    expect(knownHostsLine('h', 22, 'ssh-ed25519 AAAA')).toBe('h ssh-ed25519 AAAA\n');
    expect(knownHostsLine('127.0.0.1', 2222, ' ssh-ed25519 AAAA\n')).toBe(
      '[127.0.0.1]:2222 ssh-ed25519 AAAA\n',
    );
  });
});

describe('interactive commands (runner shell)', () => {
  it('run here with this terminal, and a Ctrl-C meant for the command does not end this process', async () => {
    const ex = localExecutor();
    const listeners = process.listenerCount('SIGINT');
    const running = ex.interactive(['sh', '-c', 'sleep 0.5; exit 3']);
    // What the terminal does on Ctrl-C: SIGINT to the whole foreground group, this process included.
    setTimeout(() => process.kill(process.pid, 'SIGINT'), 100);
    expect(await running).toEqual({ code: 3 });
    expect(process.listenerCount('SIGINT')).toBe(listeners);
  });

  describe('over ssh', () => {
    const conn = {
      kind: 'ssh' as const,
      host: 'login.site',
      port: 22,
      user: 'alice',
      hostKey: 'ssh-ed25519 AAAA',
    };
    let bin: string;
    let path: string | undefined;
    beforeEach(() => {
      // An ssh that records its argv and ends as told: what reaches the far side is the last word.
      bin = mkdtempSync(join(tmpdir(), 'kdgat-ssh-stub-'));
      writeFileSync(
        join(bin, 'ssh'),
        '#!/bin/sh\nprintf "%s\\n" "$@" >"$0.argv"\nexit "${STUB_SSH_STATUS:-0}"\n',
        {
          mode: 0o755,
        },
      );
      path = process.env['PATH'];
      process.env['PATH'] = `${bin}:${path ?? ''}`;
    });
    afterEach(() => {
      process.env['PATH'] = path;
      delete process.env['STUB_SSH_STATUS'];
      rmSync(bin, { recursive: true, force: true });
    });

    it('rides the shared master with master: shared, and its own connection without', async () => {
      const shared = sshExecutor(conn, { master: 'shared' });
      await shared.run(['true'], { timeoutSeconds: 5 });
      const argv = readFileSync(join(bin, 'ssh.argv'), 'utf8').trimEnd().split('\n');
      expect(argv).toContain(`ControlPath=${sharedControlPath(conn)!}`);
      expect(argv).toContain('ControlPersist=120');
      await sshExecutor(conn).run(['true'], { timeoutSeconds: 5 });
      expect(readFileSync(join(bin, 'ssh.argv'), 'utf8')).not.toContain('ControlPath');
    });

    it("forwards nothing for a command, nor for rsync's -e (site files copied back)", async () => {
      const session = sshExecutor(conn, { master: 'session' });
      try {
        await session.run(['true'], { timeoutSeconds: 5 });
        const argv = readFileSync(join(bin, 'ssh.argv'), 'utf8').trimEnd().split('\n');
        const off = ['ForwardAgent=no', 'ForwardX11=no', 'ClearAllForwardings=yes'];
        expect(argv).toEqual(expect.arrayContaining(off));
        const shell = session.remoteShell()!;
        expect(shell.argv[0]).toBe('ssh');
        expect(shell.argv).toEqual(expect.arrayContaining(off));
      } finally {
        session.close();
      }
    });

    it('asks for a terminal (-t), pins the host, and quotes the command once, with no timeout around it', async () => {
      const session = sshExecutor(conn, { master: 'session' });
      try {
        expect(
          await session.interactive(['salloc', '--job-name=x', 'srun', 'bash', '--rcfile', "/a b/it's.sh"]),
        ).toEqual({
          code: 0,
        });
        const argv = readFileSync(join(bin, 'ssh.argv'), 'utf8').trimEnd().split('\n');
        expect(argv[0]).toBe('-t');
        expect(argv).toContain('StrictHostKeyChecking=yes');
        expect(argv).toEqual(
          expect.arrayContaining(['ForwardAgent=no', 'ForwardX11=no', 'ClearAllForwardings=yes']),
        );
        expect(argv.some((a) => a.startsWith('ControlPath='))).toBe(true);
        expect(argv.slice(-4, -1)).toEqual(['alice', 'login.site', '--']);
        const line = argv.at(-1)!;
        expect(line).not.toMatch(/^timeout /);
        const words = spawnSync('bash', ['-c', `printf '%s|' ${line.replace(/^salloc /, '')}`], {
          encoding: 'utf8',
        });
        expect(words.stdout).toBe("--job-name=x|srun|bash|--rcfile|/a b/it's.sh|");
      } finally {
        session.close();
      }
    });

    it('says so when the connection itself failed (ssh status 255)', async () => {
      process.env['STUB_SSH_STATUS'] = '255';
      const session = sshExecutor(conn);
      await expect(session.interactive(['true'])).rejects.toThrow(ConnectionError);
    });
  });
});
