// `runner plan` against a site that is not provisioned yet: the stack's outputs predicted from its
// declared configuration (the workspace's stacks/<stack>.yaml), read and validated by the same @kdgat/config
// functions the infra program uses, and the paths derived by the same function ClusterSite uses.
// What only the live site can say (the environment's lock, the scheduler's limits and its
// `sbatch --test-only` verdict) is reported as skipped or unknown, never made up.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  parseYaml,
  rawSiteConfigFromStackFile,
  siteFromStackConfig,
  type SiteDeclaration,
} from '@kdgat/config';
import { declaredSiteOutputs } from '@kdgat/slurm-templates';
import { DEFAULT_MAX_ARRAY_SIZE } from '@kdgat/schedulers';
import { declaredStackFile, stackFileLabel, type StackConfigs } from './configs.ts';
import { StackNotProvisionedError, type StackOutputs, type StackOutputsSource } from './outputs.ts';

export { declaredStackFile, stackFileLabel, type StackConfigs };

/** Which outputs are predicted from the declaration, and which cannot be known before `pulumi up`. */
export interface DeclaredOnly {
  /** The stack file the outputs were predicted from (relative to the repository). */
  file: string;
  predicted: string[];
  unknown: string[];
}

export type PredictedStackOutputs = StackOutputs & { declared: DeclaredOnly };

export function isDeclaredOnly(outputs: StackOutputs): outputs is PredictedStackOutputs {
  return 'declared' in outputs && outputs.declared !== undefined;
}

/**
 * A stack's declared site, read and validated as the infra program reads it: relative paths
 * against the workspace root. Undefined when the stack has no configuration file.
 */
export function readDeclaredSite(
  configs: StackConfigs,
  stack: string,
): { site: SiteDeclaration; file: string } | undefined {
  const file = declaredStackFile(configs, stack);
  if (!existsSync(file)) return undefined;
  const projectFile = join(configs.repoRoot, 'infra', 'Pulumi.yaml');
  const project = parseYaml(readFileSync(projectFile, 'utf8')).value as { name?: unknown };
  if (typeof project?.name !== 'string') throw new Error(`${projectFile} names no project`);
  const raw = rawSiteConfigFromStackFile(readFileSync(file, 'utf8'), project.name, file);
  return { site: siteFromStackConfig(raw, configs.workspace.root), file };
}

/** The stack outputs a stack will have, from its declared configuration. */
export class DeclaredStackOutputs implements StackOutputsSource {
  readonly configs: StackConfigs;
  readonly description = 'declared stack configuration (not provisioned)';
  constructor(configs: StackConfigs) {
    this.configs = configs;
  }

  async read(stack: string): Promise<PredictedStackOutputs> {
    const declared = readDeclaredSite(this.configs, stack);
    if (declared === undefined)
      throw new StackNotProvisionedError(
        stack,
        `stack ${stack} has no outputs and no declared configuration (${declaredStackFile(this.configs, stack)})`,
      );
    const { site } = declared;
    const d = declaredSiteOutputs(site);
    const outputs: PredictedStackOutputs = {
      ...d,
      environments: d.environments.map((e) => ({ ...e, lockHash: '' })),
      declared: {
        file: stackFileLabel(this.configs, stack),
        predicted: [
          'environments (name, prefix, activation, spec hash, lock path of each)',
          'scratch (cache dirs, runs dir, logs dir)',
          'scripts (site script paths)',
        ],
        unknown: [
          'environment locks (made by the build on `pulumi up`)',
          `the scheduler's MaxArraySize (SLURM's default ${DEFAULT_MAX_ARRAY_SIZE} assumed) and its sbatch --test-only verdict`,
        ],
      },
    };
    return outputs;
  }
}

/**
 * Reads the stack's outputs; when the stack is not provisioned and the caller only plans, the
 * outputs are predicted from its declared configuration instead (and say so).
 */
export async function readStackOrDeclared(
  source: StackOutputsSource,
  stack: string,
  fallback: { dryRun: boolean; declared?: StackOutputsSource; log: (line: string) => void },
): Promise<{ outputs: StackOutputs; source: StackOutputsSource }> {
  try {
    return { outputs: await source.read(stack), source };
  } catch (e) {
    if (!(e instanceof StackNotProvisionedError) || !fallback.dryRun || !fallback.declared) throw e;
    const outputs = await fallback.declared.read(stack);
    if (isDeclaredOnly(outputs)) {
      fallback.log(`stack ${stack} is not provisioned (${e.message.split(': run ')[0]}).`);
      fallback.log(`  planning from its declared configuration, ${outputs.declared.file}:`);
      for (const p of outputs.declared.predicted) fallback.log(`  predicted, not read from the stack: ${p}`);
      for (const u of outputs.declared.unknown) fallback.log(`  unknown until provisioned: ${u}`);
    }
    return { outputs, source: fallback.declared };
  }
}
