// No public passphrase for a stack's secrets: scripts/with-toolchain.sh gives the default
// `kdgat-local` to the embedded `local` stack on the repository's own backend only; a command that
// needs another stack's secrets with no passphrase, passphrase file or secrets provider set is
// refused in one line naming the stack and the command that fixes it, before Pulumi runs (the
// infra:* targets in infra/bin/pulumi-stack.sh before the stack is created). A stand-in `pulumi`
// records what reached it and with which passphrase (the real CLI's side: what needs the passphrase,
// measured with Pulumi 3.259 and noted in scripts/lib/pulumi-secrets.sh).
// Run through scripts/with-toolchain.sh: `node --test scripts/toolchain/test/`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';

const repo = resolve(import.meta.dirname, '../../..');
const work = mkdtempSync(join(tmpdir(), 'kdgat-secrets-'));
after(() => rmSync(work, { recursive: true, force: true }));

const bin = join(work, 'bin');
mkdirSync(bin);
// `version` as a compatible CLI (so the wrapper keeps it), `stack --show-name` as $FAKE_SELECTED.
writeFileSync(
  join(bin, 'pulumi'),
  `#!/bin/sh
[ "$1" = version ] && { echo v3.999.0-fake; exit 0; }
[ "$1" = -C ] && shift 2
if [ "$1 $2" = "stack --show-name" ]; then
  [ -n "$FAKE_SELECTED" ] && { echo "$FAKE_SELECTED"; exit 0; }
  echo "error: no stack selected" >&2; exit 255
fi
printf 'ran: %s | passphrase=%s\\n' "$*" "\${PULUMI_CONFIG_PASSPHRASE-<unset>}"
`,
  { mode: 0o755 },
);
writeFileSync(join(bin, 'pulumi-language-nodejs'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });

const FIX =
  /export PULUMI_CONFIG_PASSPHRASE_FILE=~\/\.config\/kdgat\/(\S+)\.passphrase .*pulumi stack change-secrets-provider .* --stack \1$/;

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}${delimiter}${process.env['PATH'] ?? ''}` };
  for (const k of [
    'PULUMI_CONFIG_PASSPHRASE',
    'PULUMI_CONFIG_PASSPHRASE_FILE',
    'KDGAT_PULUMI_PASSPHRASE_DEFAULT',
    'PULUMI_STACK',
    'PULUMI_BACKEND_URL',
    'HPC_PULUMI_STACK_TOOLCHAIN',
    'HPC_INFRA_DIR',
    'FAKE_SELECTED',
  ])
    delete e[k];
  return { ...e, ...extra };
}

function wrapped(args: string[], extra: Record<string, string> = {}, cwd = join(repo, 'infra')) {
  const r = spawnSync('bash', [join(repo, 'scripts/with-toolchain.sh'), ...args], {
    cwd,
    env: env(extra),
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

/** A refusal: status 1, one line on stderr naming the stack and how to set its secrets, Pulumi not run. */
function refused(r: ReturnType<typeof wrapped>, stack: string, what: RegExp) {
  assert.equal(r.code, 1, `${r.out}${r.err}`);
  assert.equal(r.out, '', 'pulumi must not run');
  const lines = r.err.trimEnd().split('\n');
  assert.equal(lines.length, 1, r.err);
  assert.match(lines[0]!, what);
  assert.match(lines[0]!, new RegExp(`needs the secrets of stack ${stack},`));
  assert.match(lines[0]!, FIX);
  assert.equal(FIX.exec(lines[0]!)![1], stack);
}

function ran(r: ReturnType<typeof wrapped>, passphrase: string): string {
  assert.equal(r.code, 0, `${r.out}${r.err}`);
  const line = r.out.trimEnd().split('\n').at(-1)!;
  assert.match(line, /^ran: /);
  assert.ok(line.endsWith(`| passphrase=${passphrase}`), line);
  return line;
}

describe('the embedded local stack', () => {
  test('gets the default passphrase on the repository backend, named or selected', () => {
    ran(wrapped(['pulumi', 'preview', '--stack', 'local']), 'kdgat-local');
    ran(wrapped(['pulumi', 'up', '--stack=organization/kdgat-hpc/local']), 'kdgat-local');
    ran(wrapped(['pulumi', 'config', 'set', '--secret', 'k', 'v'], { PULUMI_STACK: 'local' }), 'kdgat-local');
    ran(wrapped(['pulumi', 'up'], { FAKE_SELECTED: 'local' }), 'kdgat-local');
  });

  test('on another backend is a stack like any other', () => {
    const r = wrapped(['pulumi', 'up', '--stack', 'local'], {
      PULUMI_BACKEND_URL: `file://${join(work, 'other')}`,
    });
    refused(r, 'local', /^with-toolchain: pulumi up needs/);
  });

  test('infra:preview (pulumi-stack.sh, stack local by default) runs with it', () => {
    const r = spawnSync('bash', [join(repo, 'infra/bin/pulumi-stack.sh'), 'preview'], {
      cwd: repo,
      env: env(),
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    // The stack's configuration is the workspace's (this checkout's own: stacks/local.yaml).
    const config = join(repo, 'stacks', 'local.yaml').replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    assert.match(
      r.stdout,
      new RegExp(`^ran: preview --diff --stack local --config-file ${config} \\| passphrase=kdgat-local$`, 'm'),
    );
  });
});

describe('any other stack on a file backend', () => {
  const cases: [string, string[], Record<string, string>, RegExp][] = [
    ['up', ['pulumi', 'up', '--stack', 'osc-pitzer', '--yes'], {}, /pulumi up needs/],
    ['preview -s', ['pulumi', 'preview', '-s', 'osc-pitzer'], {}, /pulumi preview needs/],
    ['destroy', ['pulumi', 'destroy', '--stack', 'osc-pitzer'], {}, /pulumi destroy needs/],
    ['refresh', ['pulumi', 'refresh', '--stack', 'osc-pitzer'], {}, /pulumi refresh needs/],
    [
      'config set --secret',
      ['pulumi', 'config', 'set', '--secret', 'sshPrivateKey', '--stack', 'osc-pitzer'],
      {},
      /pulumi config set --secret needs/,
    ],
    ['stack init NAME', ['pulumi', 'stack', 'init', 'osc-pitzer'], {}, /pulumi stack init needs/],
    ['stack select --create', ['pulumi', 'stack', 'select', '--create', 'osc-pitzer'], {}, /--create needs/],
    [
      'stack output --show-secrets',
      ['pulumi', 'stack', 'output', '--show-secrets', '--stack', 'osc-pitzer'],
      {},
      /--show-secrets needs/,
    ],
    ['$PULUMI_STACK', ['pulumi', 'up'], { PULUMI_STACK: 'osc-pitzer' }, /pulumi up needs/],
    ['the selected stack', ['pulumi', 'up'], { FAKE_SELECTED: 'osc-pitzer' }, /pulumi up needs/],
    [
      'the selected stack, -C first',
      ['pulumi', '-C', '.', 'up'],
      { FAKE_SELECTED: 'osc-pitzer' },
      /pulumi up needs/,
    ],
    [
      'an outer command with the default for local',
      ['pulumi', 'up', '--stack', 'osc-pitzer'],
      { PULUMI_CONFIG_PASSPHRASE: 'kdgat-local', KDGAT_PULUMI_PASSPHRASE_DEFAULT: '1' },
      /pulumi up needs/,
    ],
  ];
  for (const [name, args, extra, what] of cases)
    test(`is refused with the fix when its secrets are needed: ${name}`, () => {
      refused(wrapped(args, extra), 'osc-pitzer', what);
    });

  test('infra:up --stack osc-pitzer is refused before the stack is made', () => {
    const r = spawnSync('bash', [join(repo, 'infra/bin/pulumi-stack.sh'), 'up', '--stack', 'osc-pitzer'], {
      cwd: repo,
      env: env(),
      encoding: 'utf8',
      timeout: 60_000,
    });
    refused(
      { code: r.status ?? -1, out: r.stdout, err: r.stderr },
      'osc-pitzer',
      /^pulumi-stack\.sh: infra:up \(pulumi up\) needs/,
    );
  });

  test('runs what needs no secrets, without any passphrase: the runner reading its outputs', () => {
    ran(wrapped(['pulumi', 'stack', 'output', '--json', '--stack', 'osc-pitzer']), '<unset>');
    ran(
      wrapped(['pulumi', 'config', 'set', 'kdgat-hpc:cluster', 'osc-pitzer', '--stack', 'osc-pitzer']),
      '<unset>',
    );
    ran(wrapped(['pulumi', 'stack', 'ls']), '<unset>');
    ran(
      wrapped(['pulumi', 'stack', 'change-secrets-provider', 'passphrase', '--stack', 'osc-pitzer']),
      '<unset>',
    );
  });

  test("runs with the user's passphrase or passphrase file, and names a file that is not there", () => {
    ran(
      wrapped(['pulumi', 'up', '--stack', 'osc-pitzer'], { PULUMI_CONFIG_PASSPHRASE: 'only-mine' }),
      'only-mine',
    );
    const file = join(work, 'osc-pitzer.passphrase');
    writeFileSync(file, 'only-mine\n');
    chmodSync(file, 0o600);
    ran(
      wrapped(['pulumi', 'up', '--stack', 'osc-pitzer'], { PULUMI_CONFIG_PASSPHRASE_FILE: file }),
      '<unset>',
    );
    const missing = wrapped(['pulumi', 'up', '--stack', 'osc-pitzer'], {
      PULUMI_CONFIG_PASSPHRASE_FILE: join(work, 'nope'),
    });
    assert.equal(missing.code, 1);
    assert.match(
      missing.err,
      /PULUMI_CONFIG_PASSPHRASE_FILE=\S+\/nope is not a readable file \(stack osc-pitzer\)/,
    );
  });

  test('runs under the secrets provider its stack file names, and on a backend of its own (Pulumi Cloud)', () => {
    const project = join(work, 'project');
    mkdirSync(project, { recursive: true });
    writeFileSync(join(project, 'Pulumi.yaml'), 'name: p\nruntime: nodejs\n');
    writeFileSync(
      join(project, 'Pulumi.kms.yaml'),
      'secretsprovider: awskms://alias/kdgat\nencryptedkey: AAAA\n',
    );
    writeFileSync(join(project, 'Pulumi.pass.yaml'), 'encryptionsalt: v1:AAAA\n');
    ran(wrapped(['pulumi', '-C', project, 'up', '--stack', 'kms']), '<unset>');
    ran(wrapped(['pulumi', 'up', '--stack', 'kms'], {}, project), '<unset>');
    refused(wrapped(['pulumi', 'up', '--stack', 'pass'], {}, project), 'pass', /pulumi up needs/);
    ran(
      wrapped(['pulumi', 'up', '--stack', 'osc-pitzer'], { PULUMI_BACKEND_URL: 'https://api.pulumi.com' }),
      '<unset>',
    );
  });
});
