// For infra/bin/pulumi-stack.sh: the workspace a stack belongs to, and a Pulumi project directory
// inside it (`<workspace>/.hpc/infra`: a Pulumi.yaml whose `main` is this checkout's program), so
// that what Pulumi writes beside a project (a new stack's secrets salt) lands in the workspace's
// ignored `.hpc/`, never in this checkout.
//   node infra/bin/workspace.ts STACK CALLER_DIR [WORKSPACE]
// prints four lines: the workspace root, the stack's file, the state folder, the project folder.
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureHpcDir, inWorkspace, resolveWorkspace, stackFileOf } from '@kdgat/config';
import { parse, stringify } from 'yaml';

const repo = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');
const [stack, callerDir, explicit] = process.argv.slice(2);
if (!stack || !callerDir) {
  process.stderr.write('usage: node infra/bin/workspace.ts STACK CALLER_DIR [WORKSPACE]\n');
  process.exit(2);
}
try {
  const ws = resolveWorkspace({
    ...(explicit ? { explicit } : {}),
    cwd: callerDir,
    fallback: repo,
  });
  const file = stackFileOf(ws, stack);
  if (!existsSync(file)) {
    throw new Error(
      `stack ${stack} has no configuration in workspace ${ws.root}: expected ${inWorkspace(ws, file)} ` +
        `(the stack's site, clusters, environments and datasets; \`kdgat-runner init\` writes a starting one)`,
    );
  }
  const project = join(ensureHpcDir(ws), 'infra');
  mkdirSync(project, { recursive: true });
  const own = parse(readFileSync(join(repo, 'infra', 'Pulumi.yaml'), 'utf8')) as Record<string, unknown>;
  const wanted = stringify({ ...own, main: join(repo, 'infra', 'index.ts') });
  const yamlFile = join(project, 'Pulumi.yaml');
  if (!existsSync(yamlFile) || readFileSync(yamlFile, 'utf8') !== wanted) writeFileSync(yamlFile, wanted);
  if (!existsSync(join(project, 'node_modules')))
    symlinkSync(join(repo, 'node_modules'), join(project, 'node_modules'));
  mkdirSync(ws.stateDir, { recursive: true });
  for (const p of [ws.root, file, ws.stateDir, project])
    if (/[\n\r]/.test(p)) throw new Error(`path ${JSON.stringify(p)} holds a line break`);
  process.stdout.write(`${ws.root}\n${file}\n${ws.stateDir}\n${project}\n`);
} catch (e) {
  process.stderr.write(`pulumi-stack.sh: ${(e as Error).message}\n`);
  process.exit(2);
}
