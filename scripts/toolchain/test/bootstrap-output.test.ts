// What `scripts/bootstrap.sh` shows: one line per step, the tools' own output only in the log, and
// on a failure the log's path with its last lines and the tool's exit status. Each run writes its
// own log (HPC_BOOTSTRAP_LOG) and starts from the PATH a user's shell has (no toolchain on it).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { after, test } from 'node:test';

const repo = resolve(import.meta.dirname, '../../..');
const tools = process.env['HPC_TOOLS'] ?? join(homedir(), '.cache/kdgat-hpc');
const versions = readFileSync(join(repo, 'scripts/lib/versions.sh'), 'utf8');
const NODE_VERSION = /NODE_VERSION=(\S+)/.exec(versions)![1]!;
const PULUMI_VERSION = /PULUMI_VERSION=(\S+)/.exec(versions)![1]!;
const work = mkdtempSync(join(tmpdir(), 'kdgat-bootstrap-'));
after(() => rmSync(work, { recursive: true, force: true }));

const systemPath = (process.env['PATH'] ?? '')
  .split(delimiter)
  .filter((p) => !p.startsWith(tools) && !p.startsWith(join(repo, 'node_modules')))
  .join(delimiter);
const STEP = /^bootstrap: (\S.*?)\s{2,}(\S.*) \((\d+)s\)$/;

function bootstrap(name: string, env: Record<string, string> = {}) {
  const log = join(work, `${name}.log`);
  const r = spawnSync('bash', [join(repo, 'scripts/bootstrap.sh')], {
    encoding: 'utf8',
    timeout: 300_000,
    env: { ...process.env, PATH: systemPath, HPC_BOOTSTRAP_LOG: log, ...env },
  });
  return {
    code: r.status,
    stdout: r.stdout,
    stderr: r.stderr,
    log,
    logText: existsSync(log) ? readFileSync(log, 'utf8') : '',
  };
}

/** A tool cache that has this machine's Node but no Pulumi yet: the Pulumi steps build. */
function toolsWithoutPulumi(name: string): string {
  const dir = join(work, name);
  mkdirSync(join(dir, 'node'), { recursive: true });
  symlinkSync(join(tools, 'node', NODE_VERSION), join(dir, 'node', NODE_VERSION));
  return dir;
}

test('a warm bootstrap prints one line per step and nothing else', () => {
  const r = bootstrap('warm');
  assert.equal(r.code, 0, `${r.stdout}${r.stderr}`);
  assert.equal(r.stderr, '');
  const lines = r.stdout.trimEnd().split('\n');
  const steps = lines.slice(0, -1).map((l) => STEP.exec(l)?.[1]);
  assert.ok(steps.every(Boolean), r.stdout);
  for (const name of [`node ${NODE_VERSION}`, 'debian packages', 'npm ci', 'python env (uv sync --frozen)'])
    assert.ok(steps.includes(name), `no step ${name} in:\n${r.stdout}`);
  assert.ok(
    steps.some((s) => s!.startsWith('pulumi')),
    r.stdout,
  );
  assert.match(
    lines.at(-1)!,
    /^bootstrap: done in \d+s \(pulumi v3\.\d+\.\d+, node v24\.\d+\.\d+, uv \S+\)$/,
  );
  // warm: nothing was installed
  assert.doesNotMatch(r.stdout, /installed|built|synced/);
});

/** A pulumi 3.x on the system PATH is used as it is: this machine never builds Pulumi. */
const systemPulumi =
  spawnSync('bash', ['-c', 'command -v pulumi && command -v pulumi-language-nodejs'], {
    env: { ...process.env, PATH: systemPath },
  }).status === 0;

test("a cold Pulumi build keeps go's chatter in the log", (t) => {
  if (systemPulumi) return t.skip('a pulumi on the system PATH: the bootstrap builds none');
  // A stand-in for `go` that talks as the real one does on a cold module cache and writes the
  // binaries: the real build takes about 9 minutes (the failure test below runs the real go).
  const bin = join(work, 'fake-go-bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'go'),
    [
      '#!/bin/bash',
      'for i in $(seq 284); do echo "go: downloading example.com/module$i v1.$i.0" >&2; done',
      'while (($#)); do [[ $1 == -o ]] && out=$2; shift; done',
      `printf '#!/bin/sh\\necho v${PULUMI_VERSION}\\n' >"$out"`,
      'chmod +x "$out"',
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'go'), 0o755);
  const r = bootstrap('cold-pulumi', {
    PATH: `${bin}${delimiter}${systemPath}`,
    HPC_TOOLS: toolsWithoutPulumi('tools-cold'),
  });
  assert.equal(r.code, 0, `${r.stdout}${r.stderr}`);
  assert.equal(r.stderr, '');
  const lines = r.stdout.trimEnd().split('\n');
  assert.ok(
    lines.slice(0, -1).every((l) => STEP.test(l)),
    r.stdout,
  );
  assert.match(
    r.stdout,
    new RegExp(`^bootstrap: pulumi CLI ${PULUMI_VERSION.replace(/\./g, '\\.')}\\s+built \\(\\d+s\\)$`, 'm'),
  );
  assert.match(r.stdout, /^bootstrap: pulumi-language-nodejs\s+built \(\d+s\)$/m);
  assert.equal(r.logText.match(/^go: downloading /gm)?.length, 2 * 284);
});

test('a failing step names the log and shows its last lines, with the tool exit status', (t) => {
  if (systemPulumi) return t.skip('a pulumi on the system PATH: the bootstrap builds none');
  // The real go, told not to reach the module proxy, with an empty module cache: the build fails.
  const toolsDir = toolsWithoutPulumi('tools-failing');
  const r = bootstrap('failing', {
    HPC_TOOLS: toolsDir,
    GOPROXY: 'off',
    GOMODCACHE: join(work, 'empty-modcache'),
  });
  assert.equal(r.code, 1, `${r.stdout}${r.stderr}`);
  assert.match(
    r.stdout,
    new RegExp(`^bootstrap: pulumi CLI ${PULUMI_VERSION.replace(/\./g, '\\.')}\\s+FAILED \\(\\d+s\\)$`, 'm'),
  );
  assert.match(r.stderr, /^bootstrap: pulumi CLI [\d.]+: `go` exited with status 1$/m);
  assert.ok(r.stderr.includes(`the tools' output is in ${r.log}; its last lines:`), r.stderr);
  assert.match(r.stderr, /^ {2}\| \$ go -C tools\/pulumi-cli build /m);
  assert.match(r.stderr, /^ {2}\| .*GOPROXY=off/m);
  // only the failed step's lines: not the earlier steps' headers
  assert.doesNotMatch(r.stderr, /== npm ci/);
  // the tools' output is not on the terminal except in that tail
  assert.doesNotMatch(r.stdout, /GOPROXY|go: /);
  assert.match(r.logText, /GOPROXY=off/);
  // nothing half-installed
  assert.equal(existsSync(join(toolsDir, 'pulumi', PULUMI_VERSION, 'bin', 'pulumi')), false);
});

test('without root, the bootstrap finishes and says in one line which test-cluster packages it skipped', (t) => {
  // A user without root on a machine whose Debian packages lack the test cluster's (an OSC login
  // node): a user namespace gives this run uid 1000 (no capability outside it, so no apt-get), and
  // a dpkg-query that knows only ssh and rsync stands for that machine's package database.
  const probe = spawnSync('unshare', ['--user', '--map-user=1000', '--map-group=1000', 'true']);
  if (probe.status !== 0) return t.skip(`cannot make a user namespace here (${probe.stderr})`);
  const bin = join(work, 'login-node-bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'dpkg-query'),
    [
      '#!/bin/bash',
      'pkg=${!#}',
      'case $pkg in openssh-client | rsync) printf "install ok installed" ;; *) echo "dpkg-query: no packages found matching $pkg" >&2; exit 1 ;; esac',
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'dpkg-query'), 0o755);
  const log = join(work, 'nonroot.log');
  const r = spawnSync(
    'unshare',
    ['--user', '--map-user=1000', '--map-group=1000', 'bash', join(repo, 'scripts/bootstrap.sh')],
    {
      encoding: 'utf8',
      timeout: 300_000,
      env: { ...process.env, PATH: `${bin}${delimiter}${systemPath}`, HPC_BOOTSTRAP_LOG: log },
    },
  );
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  assert.equal(r.stderr, '');
  const debian = r.stdout.split('\n').find((l) => l.startsWith('bootstrap: debian packages'));
  assert.match(
    debian ?? '',
    /skipped slurm-wlm slurmdbd mariadb-server munge shellcheck shfmt openssh-server lmod chromium tmux \(not root\): `npm test` needs them .*the runner does not; as root: apt-get install slurm-wlm slurmdbd mariadb-server munge/,
  );
  assert.match(r.stdout.trimEnd().split('\n').at(-1)!, /^bootstrap: done in \d+s \(pulumi v3\./);
  assert.doesNotMatch(readFileSync(log, 'utf8'), /apt-get/);
});
