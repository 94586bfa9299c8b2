// Stack outputs (docs/CONTRACTS.md "Stack outputs", `StackOutputsSchema` of @kdgat/config) behind
// one small interface with two sources: the real Pulumi CLI, and a JSON file (`--stack-outputs <file>`).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { StackOutputsSchema, type StackOutputs } from '@kdgat/config';
import { runCommand } from '@kdgat/schedulers';

// The schema is the one contract's (@kdgat/config); re-exported for the runner's callers.
export { StackOutputsSchema, type StackOutputs };

export class StackNotProvisionedError extends Error {
  readonly stackName: string;
  constructor(stack: string, why: string) {
    super(`${why}: run \`pulumi up\` on stack ${stack} first (npx nx run infra:up --stack ${stack})`);
    this.name = 'StackNotProvisionedError';
    this.stackName = stack;
  }
}

export interface StackOutputsSource {
  /** Where the outputs come from, in words (for the manifest and messages). */
  readonly description: string;
  read(stack: string): Promise<StackOutputs>;
}

function validate(stack: string, value: unknown, from: string): StackOutputs {
  const parsed = StackOutputsSchema.safeParse(value);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new StackNotProvisionedError(
      stack,
      `stack outputs from ${from} lack ${first.path.join('.') || '(root)'} (${first.message})`,
    );
  }
  return parsed.data;
}

/** `pulumi stack output --json --stack <s>` run in infra/ through scripts/with-toolchain.sh. */
export class PulumiStackOutputs implements StackOutputsSource {
  readonly repoRoot: string;
  readonly description = 'pulumi stack output';
  constructor(repoRoot: string) {
    this.repoRoot = repoRoot;
  }

  async read(stack: string): Promise<StackOutputs> {
    const wrapper = join(this.repoRoot, 'scripts', 'with-toolchain.sh');
    const [cmd, args] = existsSync(wrapper)
      ? ['bash', [wrapper, 'pulumi', 'stack', 'output', '--json', '--stack', stack]]
      : ['pulumi', ['stack', 'output', '--json', '--stack', stack]];
    let r;
    try {
      r = await runCommand(cmd, args as string[], { cwd: join(this.repoRoot, 'infra') });
    } catch (e) {
      throw new StackNotProvisionedError(stack, `cannot run pulumi (${(e as Error).message})`);
    }
    if (r.code !== 0) {
      const why = r.stderr.trim().split('\n').pop() ?? `exit ${r.code}`;
      throw new StackNotProvisionedError(stack, `stack ${stack} has no outputs (${why})`);
    }
    let json: unknown;
    try {
      json = JSON.parse(r.stdout);
    } catch {
      throw new StackNotProvisionedError(stack, `pulumi printed no JSON for stack ${stack}`);
    }
    if (json && typeof json === 'object' && Object.keys(json).length === 0) {
      throw new StackNotProvisionedError(stack, `stack ${stack} has no outputs`);
    }
    return validate(stack, json, `pulumi stack ${stack}`);
  }
}

/**
 * A JSON file holding either one stack's outputs or `{ "<stack>": outputs, … }`.
 * Used by tests that do not exercise Pulumi, and by `--stack-outputs`.
 */
export class FileStackOutputs implements StackOutputsSource {
  readonly path: string;
  readonly description: string;
  constructor(path: string) {
    this.path = path;
    this.description = `file ${path}`;
  }

  async read(stack: string): Promise<StackOutputs> {
    if (!existsSync(this.path))
      throw new StackNotProvisionedError(stack, `stack outputs file ${this.path} does not exist`);
    const json = JSON.parse(readFileSync(this.path, 'utf8')) as Record<string, unknown>;
    const value = 'environment' in json ? json : json[stack];
    if (value === undefined)
      throw new StackNotProvisionedError(stack, `${this.path} has no outputs for stack ${stack}`);
    return validate(stack, value, this.path);
  }
}

/** Refuses a stack provisioned from another environment spec than the experiment asks for. */
export function checkEnvironmentMatches(
  stack: string,
  outputs: StackOutputs,
  wantedName: string,
  wantedHash: string,
  /** The stack file, when the outputs are predicted from it (the stack is not provisioned). */
  declaredIn?: string,
): void {
  if (outputs.environment.specHash !== wantedHash && declaredIn !== undefined) {
    throw new StackNotProvisionedError(
      stack,
      `stack ${stack} declares environment ${outputs.environment.name} (${declaredIn}, spec hash ${outputs.environment.specHash.slice(0, 12)}), ` +
        `but the experiment asks for ${wantedName} (spec hash ${wantedHash.slice(0, 12)}): declare that environment in ${declaredIn}`,
    );
  }
  if (outputs.environment.specHash !== wantedHash) {
    throw new StackNotProvisionedError(
      stack,
      `stack ${stack} was provisioned with environment ${outputs.environment.name} (spec hash ${outputs.environment.specHash.slice(0, 12)}), ` +
        `but the experiment asks for ${wantedName} (spec hash ${wantedHash.slice(0, 12)})`,
    );
  }
}
