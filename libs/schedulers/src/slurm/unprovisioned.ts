// The scheduler of a site that is not provisioned yet (`runner plan` from the declared stack
// configuration): what needs the live cluster is skipped and says why. Nothing can be submitted.
import { runCommand } from '../exec.ts';
import type { PreflightResult, Scheduler, SchedulerLimits, SubmitRequest } from '../core.ts';

/** SLURM's own default MaxArraySize, assumed when the live cluster cannot be asked. */
export const DEFAULT_MAX_ARRAY_SIZE = 1001;

/**
 * The scheduler of a site that is not provisioned: what needs the live cluster is skipped, and
 * says why; the scripts are still checked with `bash -n`. Nothing can be submitted through it.
 */
export class UnprovisionedSlurm implements Scheduler {
  readonly kind = 'slurm' as const;
  readonly submitCalls = 0;
  readonly stack: string;
  constructor(stack: string) {
    this.stack = stack;
  }

  get reason(): string {
    return `stack ${this.stack} is not provisioned, and sbatch --test-only needs its live cluster (run \`npx nx run infra:up --stack ${this.stack}\`, then plan again)`;
  }

  async limits(): Promise<SchedulerLimits> {
    return { maxArraySize: DEFAULT_MAX_ARRAY_SIZE };
  }

  async preflight(request: SubmitRequest): Promise<PreflightResult> {
    const syntax = await runCommand('bash', ['-n', request.scriptPath]);
    if (syntax.code !== 0)
      return { ok: false, message: `bash -n ${request.scriptPath}: ${syntax.stderr.trim()}` };
    return { ok: true, message: `bash -n passed; sbatch --test-only SKIPPED: ${this.reason}` };
  }

  submit(): Promise<string> {
    return Promise.reject(new Error(`cannot submit: ${this.reason}`));
  }

  cancel(): Promise<void> {
    return Promise.reject(new Error(`cannot cancel: ${this.reason}`));
  }

  async query(): Promise<Map<string, never[]>> {
    return new Map();
  }
}
