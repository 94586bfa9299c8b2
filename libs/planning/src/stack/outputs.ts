// Stack outputs (docs/CONTRACTS.md "Stack outputs", `StackOutputsSchema` of @kdgat/config) behind
// one small interface with two sources: the real Pulumi CLI, and a JSON file (`--stack-outputs <file>`).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  StackOutputsSchema,
  environmentSpecHash,
  stackEnvironment,
  type EnvironmentSpec,
  type StackOutputs,
} from '@kdgat/config';
import { runCommand } from '@kdgat/schedulers';
import { workspaceBackendEnv, type StackConfigs } from './configs.ts';

// The schema is the one contract's (@kdgat/config); re-exported for the runner's callers.
export { StackOutputsSchema, type StackOutputs };

export class StackNotProvisionedError extends Error {
  readonly stackName: string;
  constructor(stack: string, why: string) {
    super(
      `${why}: run \`pulumi up\` on stack ${stack} first (kdgat-runner infra up --stack ${stack}; in the kdgat-hpc checkout: npx nx run infra:up --stack ${stack})`,
    );
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

/**
 * `pulumi stack output --json --stack <s>` run in infra/ through scripts/with-toolchain.sh, on the
 * workspace's backend (its state) unless PULUMI_BACKEND_URL names another.
 */
export class PulumiStackOutputs implements StackOutputsSource {
  readonly configs: StackConfigs;
  readonly description = 'pulumi stack output';
  constructor(configs: StackConfigs) {
    this.configs = configs;
  }

  async read(stack: string): Promise<StackOutputs> {
    const { repoRoot } = this.configs;
    const wrapper = join(repoRoot, 'scripts', 'with-toolchain.sh');
    const [cmd, args] = existsSync(wrapper)
      ? ['bash', [wrapper, 'pulumi', 'stack', 'output', '--json', '--stack', stack]]
      : ['pulumi', ['stack', 'output', '--json', '--stack', stack]];
    let r;
    try {
      r = await runCommand(cmd, args as string[], {
        cwd: join(repoRoot, 'infra'),
        env: workspaceBackendEnv(this.configs),
      });
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
    const value = 'environments' in json || 'environment' in json ? json : json[stack];
    if (value === undefined)
      throw new StackNotProvisionedError(stack, `${this.path} has no outputs for stack ${stack}`);
    return validate(stack, value, this.path);
  }
}

/**
 * Refuses a stack that lacks an environment the experiment runs in, or was provisioned from
 * another spec of it. `wanted`: every environment the experiment's stages use, by name.
 */
export function checkEnvironmentMatches(
  stack: string,
  outputs: StackOutputs,
  wanted: Readonly<Record<string, EnvironmentSpec>>,
  /** The stack file, when the outputs are predicted from it (the stack is not provisioned). */
  declaredIn?: string,
  /** The stack's configuration file, as the user reads it (where an environment is added). */
  stackFile = `stacks/${stack}.yaml`,
): void {
  const file = declaredIn ?? stackFile;
  const declared = outputs.environments.map((e) => e.name).join(', ');
  for (const [name, spec] of Object.entries(wanted)) {
    const hash = environmentSpecHash(spec);
    const have = stackEnvironment(outputs, name);
    if (!have) {
      throw new StackNotProvisionedError(
        stack,
        `stack ${stack} has environment(s) ${declared}, but the experiment asks for ${name}: ` +
          `add it to kdgat-hpc:environments in ${file}`,
      );
    }
    if (have.specHash === hash) continue;
    throw new StackNotProvisionedError(
      stack,
      declaredIn !== undefined
        ? `stack ${stack} declares environment ${name} (${declaredIn}, spec hash ${have.specHash.slice(0, 12)}), ` +
            `but the experiment asks for another ${name} (spec hash ${hash.slice(0, 12)}): declare that environment in ${declaredIn}`
        : `stack ${stack} was provisioned with environment ${name} (spec hash ${have.specHash.slice(0, 12)}), ` +
            `but the experiment asks for another ${name} (spec hash ${hash.slice(0, 12)})`,
    );
  }
}
