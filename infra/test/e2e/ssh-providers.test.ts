// The provider implementations through a real sshd on loopback: the same code path as a login node.
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runChecked, sshExecutor, type Connection } from '@kdgat/transport';
import * as dir from '../../providers/target-directory.impl.ts';
import * as file from '../../providers/target-file.impl.ts';
import { startSshd, strayHostKey, type LoopbackSshd } from './sshd.ts';

let sshd: LoopbackSshd;
let conn: Extract<Connection, { kind: 'ssh' }>;

beforeAll(async () => {
  sshd = await startSshd();
  conn = {
    kind: 'ssh',
    host: sshd.host,
    port: sshd.port,
    user: sshd.user,
    hostKey: sshd.hostKey,
    privateKey: sshd.clientKey,
  };
});
afterAll(() => sshd?.stop());

describe('ssh executor against a real sshd', () => {
  it('runs argv remotely with every value arriving intact', async () => {
    const out = await runChecked(
      sshExecutor(conn),
      ['printf', '%s|', "it's", '$HOME', 'a b', 'new\nline', ''],
      { timeoutSeconds: 30 },
    );
    expect(out).toBe("it's|$HOME|a b|new\nline||");
  });

  it('refuses a server whose host key is not the pinned one, and says so', async () => {
    await expect(
      runChecked(sshExecutor({ ...conn, hostKey: strayHostKey() }), ['true'], { timeoutSeconds: 30 }),
    ).rejects.toThrow(/refused: the server's host key does not match the pinned hostKey/);
  });

  it('bounds a remote command with the timeout on both sides', async () => {
    const r = await sshExecutor(conn).run(['sleep', '60'], { timeoutSeconds: 2 });
    expect(r.timedOut).toBe(true);
  });

  it('leaves no private key file behind', async () => {
    const before = new Set(readdir());
    await runChecked(sshExecutor(conn), ['true'], { timeoutSeconds: 30 });
    expect(readdir().filter((f) => !before.has(f))).toEqual([]);
  });
});

function readdir(): string[] {
  return readdirSync(tmpdir()).filter((f) => f.startsWith('hpc-ssh-'));
}

describe('file and directory providers through ssh', () => {
  it('installs a script and a group-shared directory on the remote side', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-remote-'));
    const path = join(root, 'scripts', "job epilog's.sh");
    const { id, outs } = await file.create({
      connection: conn,
      path,
      content: '#!/bin/bash\necho "$1"\n',
      mode: '0755',
    });
    expect(readFileSync(path, 'utf8')).toBe('#!/bin/bash\necho "$1"\n');
    expect(statSync(path).mode & 0o777).toBe(0o755);
    await file.remove(id, outs);
    expect(existsSync(path)).toBe(false);

    const d = await dir.create({ connection: conn, path: join(root, 'cache', 'hcrl_sa'), mode: '2770' });
    expect(d.outs.appliedMode).toBe('2770');
    expect(statSync(join(root, 'cache', 'hcrl_sa')).mode & 0o7777).toBe(0o2770);
  });
});
