import { z } from 'zod';
import { SCRIPT_VALUES, ruleString } from '../script-values.ts';
import { BalanceCommandSchema, ChargingSchema } from './charging.ts';

/** Names that end up in paths, job names and shell scripts: conservative on purpose. */
export const SafeName = ruleString(SCRIPT_VALUES.name);

export const SlurmTime = ruleString(SCRIPT_VALUES.slurmTime);

/** An absolute path, or one relative to the repository (the local stack's `.hpc/…`). No shell text. */
export const SitePath = ruleString(SCRIPT_VALUES.sitePath);

export const SlurmAccount = ruleString(SCRIPT_VALUES.account);
export const GpuType = ruleString(SCRIPT_VALUES.gpuType);
export const ModuleName = ruleString(SCRIPT_VALUES.moduleName);

export const PartitionSchema = z
  .object({
    name: SafeName,
    gpuType: GpuType.optional(),
    gpusPerNode: z.number().int().min(0),
    gpuMemGB: z.number().min(0).default(0),
    coresPerNode: z.number().int().positive(),
    memPerNodeGB: z.number().positive(),
    /** Memory billed as one core, per partition: usable memory / cores (Pitzer gpu: 363 / 40 ≈ 9.074 GB). */
    memPerCoreGB: z.number().positive().optional(),
    maxWalltime: SlurmTime,
  })
  .strict();
export type Partition = z.infer<typeof PartitionSchema>;

const SshHost = z.string().regex(/^[A-Za-z0-9.-]+$/, 'a host name or address');
const SshUser = z.string().regex(/^[a-z_][a-z0-9_.-]*$/i, 'a user name');
/** An OpenSSH public host key line: `<type> <base64>`. Pinned: no unchecked host keys. */
const HostKey = z
  .string()
  .regex(
    /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=_]+( .*)?$/,
    'an OpenSSH host key line such as "ssh-ed25519 AAAA…"',
  );

export const SshConnectionSchema = z
  .object({
    kind: z.literal('ssh'),
    host: SshHost,
    port: z.number().int().min(1).max(65535).default(22),
    user: SshUser,
    /** Secret: kept in Pulumi secrets, never printed or logged. */
    privateKey: z.string().optional(),
    privateKeyPath: SitePath.optional(),
    hostKey: HostKey,
    /**
     * How often `--wait` may ask the login node for its jobs' states: at most once every
     * `minSeconds`, backing off to once every `maxSeconds` while no state changes (login nodes ask
     * users not to hammer squeue; OSC's etiquette is the default).
     */
    poll: z
      .object({
        minSeconds: z.number().min(1).max(300).default(5),
        maxSeconds: z.number().min(1).max(3600).default(30),
      })
      .strict()
      .superRefine((p, ctx) => {
        if (p.maxSeconds < p.minSeconds)
          ctx.addIssue({
            code: 'custom',
            path: ['maxSeconds'],
            message: `maxSeconds ${p.maxSeconds} is under minSeconds ${p.minSeconds}: expected at least ${p.minSeconds}`,
          });
      })
      .optional(),
    /** One jump host (ssh -J). */
    proxy: z
      .object({
        host: SshHost,
        port: z.number().int().min(1).max(65535).default(22),
        user: SshUser,
        hostKey: HostKey,
      })
      .strict()
      .optional(),
  })
  .strict();

export const ConnectionSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('local') }).strict(),
  SshConnectionSchema,
]);
export type Connection = z.infer<typeof ConnectionSchema>;

/**
 * The connection as a stack output and a manifest keep it: everything the runner needs to reach the
 * site but the secret key (a key file's path stays; the key itself never leaves Pulumi's secrets).
 */
export function publicConnection(connection: Connection): Connection {
  if (connection.kind === 'local') return { kind: 'local' };
  const { privateKey: _secret, ...rest } = connection;
  return rest;
}

export const ClusterProfileSchema = z
  .object({
    name: SafeName,
    /** The name `-M` takes in SLURM commands and post-job hints (e.g. `pitzer`). */
    clusterName: SafeName,
    connection: ConnectionSchema,
    scheduler: z.enum(['slurm', 'local']),
    account: SlurmAccount.optional(),
    /** OSC requires --account on every job. */
    accountRequired: z.boolean().default(false),
    /** `gres`: --gres=gpu:v100:1; `gpus-per-node`: --gpus-per-node=v100:1. */
    gpuDirective: z.enum(['gres', 'gpus-per-node']).default('gres'),
    partitions: z.array(PartitionSchema).min(1),
    defaultPartition: SafeName,
    modules: z
      .object({
        cuda: ModuleName.optional(),
        conda: ModuleName.optional(),
        /**
         * The site's Lmod init script, sourced when a shell (a non-interactive SSH login, a batch
         * job) has no `module` command yet. Default `/etc/profile.d/lmod.sh`.
         */
        init: ruleString(SCRIPT_VALUES.lmodInit).optional(),
      })
      .strict()
      .default({}),
    paths: z
      .object({
        projectRoot: SitePath,
        scratchRoot: SitePath,
        homeCacheRoot: SitePath,
        logsDir: SitePath,
        /**
         * Where the site user's Jupyter finds kernels (OnDemand's Jupyter app reads
         * `<home>/.local/share/jupyter/kernels`). Needed by a remote site whose environments declare a
         * kernel; on this machine the default is this home's (`kernelsDirFor`).
         */
        kernelsDir: SitePath.optional(),
      })
      .strict(),
    /** Days without access after which the site purges scratch files (OSC: 60; some sources say 90). */
    scratchPurgeDays: z.number().int().positive(),
    /** Printed by the epilog: `{cluster}` and `{jobid}` are filled in (e.g. `gpu-seff -M {cluster} {jobid}`). */
    postJobHint: z
      .string()
      .regex(
        /^[A-Za-z0-9_ {}./=-]+$/,
        'a command of letters, digits, spaces and {cluster} {jobid} placeholders',
      )
      .optional(),
    /**
     * The site's per-user limits (OSC Pitzer: 128 running jobs). SLURM counts every array task as
     * a job; the runner throttles a run so that the user's jobs stay within them (see
     * libs/planning/src/throttle.ts) instead of letting the scheduler reject or bury them.
     */
    limits: z
      .object({
        /** Jobs (array tasks each) one user may have running at once (SLURM QOS MaxJobsPerUser). */
        maxRunningJobsPerUser: z.number().int().positive().optional(),
        /** Jobs one user may have queued or running (SLURM MaxSubmitJobsPerUser): more is refused by sbatch. */
        maxSubmittedJobsPerUser: z.number().int().positive().optional(),
      })
      .strict()
      .default({}),
    /** What the site charges (cost estimates, budgets); see charging.ts. */
    charging: ChargingSchema.optional(),
    /** A command that prints the account's balance (OSC: OSCusage). */
    balance: BalanceCommandSchema.optional(),
  })
  .strict()
  .superRefine((p, ctx) => {
    for (const name of Object.keys(p.charging?.partitions ?? {}))
      if (!p.partitions.some((q) => q.name === name))
        ctx.addIssue({
          code: 'custom',
          path: ['charging', 'partitions', name],
          message: `charging rates for "${name}", which is not one of the partitions (${p.partitions.map((q) => q.name).join(', ')})`,
        });
    if (!p.partitions.some((q) => q.name === p.defaultPartition)) {
      ctx.addIssue({
        code: 'custom',
        path: ['defaultPartition'],
        message: `defaultPartition "${p.defaultPartition}" is not one of the partitions (${p.partitions.map((q) => q.name).join(', ')})`,
      });
    }
    const seen = new Set<string>();
    p.partitions.forEach((q, i) => {
      if (seen.has(q.name))
        ctx.addIssue({
          code: 'custom',
          path: ['partitions', i, 'name'],
          message: `partition "${q.name}" is declared twice`,
        });
      seen.add(q.name);
    });
  });
export type ClusterProfile = z.infer<typeof ClusterProfileSchema>;
export type ClusterProfileInput = z.input<typeof ClusterProfileSchema>;
