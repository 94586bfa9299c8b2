// End-to-end check of the Pulumi toolchain the bootstrap builds: the real CLI, our Node.js language
// host and the dynamic-provider plugin, on a throwaway local file backend. The resource runs a
// shell command on create/update and another on delete, as @pulumi/command's local.Command would
// (its provider cannot be built here: docs/decisions/0001).
// Run through scripts/with-toolchain.sh: `node --test scripts/toolchain/test/`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';

const repo = resolve(import.meta.dirname, '../../..');
const work = mkdtempSync(join(tmpdir(), 'kdgat-toolchain-'));
const project = join(work, 'project');
const env = {
  ...process.env,
  PULUMI_BACKEND_URL: `file://${join(work, 'state')}`,
  PULUMI_HOME: join(work, 'pulumi-home'),
  PULUMI_CONFIG_PASSPHRASE: 'toolchain-test',
  PULUMI_SKIP_UPDATE_CHECK: 'true',
  PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
};

function pulumi(...args: string[]): { code: number; out: string } {
  const r = spawnSync('pulumi', [...args, '--non-interactive'], { cwd: project, env, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

function ok(...args: string[]): string {
  const r = pulumi(...args);
  assert.equal(r.code, 0, `pulumi ${args.join(' ')} failed:\n${r.out}`);
  return r.out;
}

const program = `
import * as pulumi from '@pulumi/pulumi';

// Runs \`create\` on create and update, \`delete\` on delete (with the inputs stored in the state).
const shellCommand: pulumi.dynamic.ResourceProvider = {
  async create(inputs) {
    const { execFileSync } = await import('node:child_process');
    execFileSync('bash', ['-c', inputs.create]);
    return { id: 'shell-command', outs: inputs };
  },
  async update(_id, _olds, news) {
    const { execFileSync } = await import('node:child_process');
    execFileSync('bash', ['-c', news.create]);
    return { outs: news };
  },
  async delete(_id, props) {
    const { execFileSync } = await import('node:child_process');
    execFileSync('bash', ['-c', props.delete]);
  },
};

const dir = new pulumi.Config().require('dir');
const greeting = new pulumi.Config().require('greeting');
new pulumi.dynamic.Resource(shellCommand, 'greet', {
  create: \`echo \${greeting} > \${dir}/created\`,
  delete: \`rm \${dir}/created && touch \${dir}/deleted\`,
});
export const said = greeting;
`;

before(() => {
  mkdirSync(project);
  mkdirSync(join(work, 'state'));
  writeFileSync(
    join(project, 'Pulumi.yaml'),
    'name: toolchain-check\nruntime:\n  name: nodejs\n  options:\n    typescript: false\nmain: index.ts\n',
  );
  writeFileSync(join(project, 'package.json'), '{ "name": "toolchain-check", "type": "module" }\n');
  writeFileSync(join(project, 'index.ts'), program);
  symlinkSync(join(repo, 'node_modules'), join(project, 'node_modules'));
  ok('stack', 'init', 'dev');
  ok('config', 'set', 'dir', work);
  ok('config', 'set', 'greeting', 'hello');
});

after(() => rmSync(work, { recursive: true, force: true }));

test('the CLI is the pinned version', () => {
  const versions = readFileSync(join(repo, 'scripts/lib/versions.sh'), 'utf8');
  const pinned = /PULUMI_VERSION=(\S+)/.exec(versions)?.[1];
  assert.ok(pinned);
  assert.equal(ok('version').trim(), `v${pinned}`);
});

test('up runs the create command', () => {
  ok('up', '--yes', '--skip-preview');
  assert.equal(readFileSync(join(work, 'created'), 'utf8'), 'hello\n');
});

test('a changed input shows in preview --diff, line by line', () => {
  ok('config', 'set', 'greeting', 'world');
  const out = ok('preview', '--diff');
  assert.match(out, /~ create: "echo hello > .*created" => "echo world > .*created"/);
  assert.match(out, /1 to update/);
  ok('up', '--yes', '--skip-preview');
  assert.equal(readFileSync(join(work, 'created'), 'utf8'), 'world\n');
});

test('a second up without change reports no changes', () => {
  const out = ok('preview', '--expect-no-changes');
  assert.doesNotMatch(out, /to update|to create|to delete/);
});

test('destroy runs the delete command', () => {
  ok('destroy', '--yes', '--skip-preview');
  assert.equal(existsSync(join(work, 'created')), false);
  assert.equal(existsSync(join(work, 'deleted')), true);
});
