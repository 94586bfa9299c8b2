#!/usr/bin/env node
// Entry point: Node 24 runs the TypeScript sources directly (type stripping). Started by an older
// Node (a system Node 20, say), it hands over to the repository's toolchain; a checkout that is not
// bootstrapped gets one line saying what to run, not a stack trace.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { URL, fileURLToPath } from 'node:url';
import process from 'node:process';

const self = fileURLToPath(import.meta.url);
const repo = fileURLToPath(new URL('../../..', import.meta.url));
const toolchain = `${repo}scripts/with-toolchain.sh`;
const notBootstrapped = (what) => {
  process.stderr.write(`kdgat-runner: this checkout is not bootstrapped (${what}): run \`npm run bootstrap\`\n`);
  process.exit(1);
};

const major = Number(process.versions.node.split('.')[0]);
if (major < 23) {
  if (process.env.HPC_RUNNER_REEXEC || !existsSync(toolchain)) notBootstrapped(`Node ${process.versions.node} cannot run it`);
  const r = spawnSync('bash', [toolchain, 'node', self, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, HPC_RUNNER_REEXEC: '1' },
  });
  process.exit(r.status ?? 1);
}

let main;
try {
  ({ main } = await import('../src/cli/main.ts'));
} catch (e) {
  // A package missing from node_modules is a setup problem; anything else is a bug to show in full.
  const missing = /Cannot find (?:package|module) '([^.'/][^']*)'/.exec(String(e?.message));
  if (e?.code === 'ERR_MODULE_NOT_FOUND' && missing) notBootstrapped(`package ${missing[1]} is not installed`);
  throw e;
}
process.exitCode = await main(process.argv.slice(2));
