// `runner shell`: an interactive allocation on the site in a stage's environment, so a researcher
// debugs what the stage's job sees: its partition and resources (the spec resolved and the stack
// checked as `plan` does), its modules, environment activation, code snapshot on PYTHONPATH and
// staged caches (the job script's own sections: renderInteractiveShell of @kdgat/slurm-templates).
// What it charges and the account are printed before anything is asked of SLURM; bad input is
// refused before that. Without --spec: the cluster profile's default partition, modest resources.
// On a site of several clusters, `--cluster NAME` opens it on another of them (salloc -M), the spec
// resolved against that cluster's profile as `train --cluster NAME` resolves it.
import {
  environmentClusterProblems,
  shellsDirFor,
  siteUserOf,
  type ClusterProfile,
  type ResolvedStage,
  defaultEnvironment,
  defaultPipeline,
  stackEnvironment,
} from '@kdgat/config';
import {
  declaredStackFile,
  pipelineOf,
  policiesOf,
  readDeclaredSite,
  stageJobEnv,
  type StackConfigs,
  type StackOutputs,
  type StackOutputsSource,
} from '@kdgat/planning';
import { jobNameFor, renderInteractiveShell, shq, type InteractiveShellInput } from '@kdgat/slurm-templates';
import { SiteFiles, sessionFor } from '@kdgat/transport';
import { UsageError } from '../errors.ts';
import { configsOf, localRunsRoot } from '../paths.ts';
import { specFor } from '../place.ts';
import { checkStack, loadSpec, logWarnings } from '../prepare.ts';
import { shipCode } from '../record.ts';
import type { Site, Spec } from '../types.ts';
import { chargeLines, shellResources, type ShellFlags } from './resources.ts';

/**
 * The environment a stage's job runs in, from the stack's outputs (without a stage: the stack's
 * default). Today a stack has one environment; with several, the one the stage names.
 */
export function stageEnvironment(stack: StackOutputs, stage?: ResolvedStage) {
  return (stage && stackEnvironment(stack, stage.environment)) ?? defaultEnvironment(stack);
}

export interface ShellOptions {
  stack: string;
  stackSource: StackOutputsSource;
  specPath?: string;
  stageId?: string;
  /** A site of several clusters: the one to open the shell on (its name or SLURM name). */
  cluster?: string;
  flags: ShellFlags;
  scheduler?: 'slurm' | 'local';
  allowDirty?: boolean;
  repoRoot: string;
  /** Where the stack's configuration is: the profile of a shell without a spec; the local copies. */
  configs?: StackConfigs;
  /** Whether this process has a terminal to lend the shell (tests say yes). */
  terminal: () => boolean;
  log: (line: string) => void;
}

/** What the shell is of: a spec's stage, or the cluster profile alone; `via`: another cluster's -M. */
interface Subject {
  profile: ClusterProfile;
  spec?: Spec;
  stage?: ResolvedStage;
  via?: string;
}

/** Opens the shell and returns the exit status once it ended (0: it ended as the user left it). */
export async function openShell(opts: ShellOptions): Promise<number> {
  const { log } = opts;
  const own: Subject = opts.specPath ? await stageOf(opts, log) : { profile: stackProfile(opts) };
  const scheduler = opts.scheduler ?? own.profile.scheduler;
  if (scheduler !== 'slurm')
    throw new UsageError(
      `runner shell opens a SLURM allocation, and cluster profile ${own.profile.name} runs jobs with the ${scheduler} scheduler (bash here): ` +
        'pass --scheduler slurm for a SLURM here (scripts/slurm-local.sh), or source the stack output environment.activate',
    );
  // On the stack's own cluster the resources are refused before the site is asked anything; another
  // cluster's profile is the site's to say.
  const early = opts.cluster === undefined ? shellResources(own.profile, own.stage, opts.flags) : undefined;
  const site = own.spec
    ? await checkStack(
        own.spec,
        { stack: opts.stack, stackSource: opts.stackSource, repoRoot: opts.repoRoot, configs: opts.configs },
        log,
      )
    : await siteOf(opts, own.profile);
  const subject = opts.cluster === undefined ? own : onCluster(own, site, opts.cluster);
  const { profile, spec, stage } = subject;
  const { resources, partition } = early ?? shellResources(profile, stage, opts.flags);
  const label = stage?.id ?? partition.name;

  log(
    spec && stage
      ? `shell: stage ${stage.id} of ${spec.resolved.spec.name} (spec ${spec.resolved.specHash.slice(0, 8)}) on stack ${site.name}, as its job sees it`
      : `shell: no stage: the defaults of cluster profile ${profile.name} on stack ${site.name}`,
  );
  if (subject.via) log(`  cluster: ${profile.name} (-M ${subject.via}), one of the site's clusters`);
  const r = resources;
  log(
    `  ${r.partition}: ${r.nodes} node(s) x ${r.ntasksPerNode} task(s) x ${r.cpus} cpu(s), ${r.memGB} GB and ${r.gpus.count} GPU(s) per node, time limit ${r.time}`,
  );
  for (const line of chargeLines(profile, label, resources)) log(line);
  if (!opts.terminal())
    throw new Error(
      'runner shell is interactive: run it in a terminal (stdin is not one); nothing was allocated',
    );

  const environment = stageEnvironment(site.outputs, stage);
  const pipeline = spec?.resolved.pipeline;
  const code = await shipCode(site, { ...opts, allowDirty: opts.allowDirty === true }, log, pipeline);
  const data = dataOf(site.outputs, spec, stage);
  const jobName = jobNameFor(spec?.resolved.spec.name ?? 'shell', `${label}-shell`, pipeline?.name);
  // On the site's scratch, which its compute nodes see (as they see the code snapshots beside it),
  // in the user's own directory: read only when salloc starts, it must not be swappable till then.
  const shellsDir = shellsDirFor(site.outputs.scratch.root, siteUserOf(site.connection));
  const initPath = `${shellsDir}/${jobName}-${Date.now()}.sh`;
  const input: InteractiveShellInput = {
    jobName,
    label,
    profile: { ...profile, scheduler: 'slurm' },
    resources,
    partition,
    environment: {
      name: environment.name,
      backend: environment.backend as 'conda' | 'venv',
      prefix: environment.prefix,
      ...(environment.modules !== undefined && environment.modules.length > 0
        ? { modules: environment.modules }
        : {}),
      ...(code
        ? { code: code.recorded.dir, ...(pipeline ? { codePaths: pipeline.codePaths } : {}) }
        : pipeline?.codeDir
          ? { code: pipeline.codeDir, codePaths: pipeline.codePaths }
          : {}),
    },
    ...(data ? { data } : {}),
    initPath,
    ...(subject.via ? { cluster: subject.via } : {}),
  };
  const { argv, init } = renderInteractiveShell(input);
  log(
    `environment: ${environment.name} (${environment.backend}, ${environment.prefix}` +
      `${environment.modules?.length ? `, modules ${environment.modules.join(' ')}` : ''})` +
      `${profile.modules.cuda ? `, module ${profile.modules.cuda}` : ''}; ` +
      `code: ${code ? `snapshot ${code.recorded.dir}` : "the environment's installed pipeline"}`,
  );
  log(`data: ${dataLine(data)}`);

  const files = site.files ?? new SiteFiles(sessionFor(site.connection));
  await files.ensurePrivateDir(shellsDir);
  await files.putFile(initPath, init);
  log(`init: ${initPath} (bash --rcfile; removed when the shell ends)`);
  log(`allocating: ${argv.map((a) => shq(a)).join(' ')}`);
  try {
    const ended = await files.session.interactive(argv);
    log(
      `shell: ended (salloc ${ended.signal ? `killed by ${ended.signal}` : `exited ${ended.code}`}); the allocation is released`,
    );
    return ended.code === 0 && !ended.signal ? 0 : 1;
  } finally {
    await files.session.run(['rm', '-f', initPath], { timeoutSeconds: 30 }).catch(() => undefined);
  }
}

/**
 * The shell on another cluster of the site (`--cluster`): that cluster's profile from the stack's
 * outputs, and the spec resolved against it as `train --cluster` resolves it (its partitions and
 * charging); refused, naming the site's clusters, when the name is none of them.
 */
function onCluster(own: Subject, site: Site, wanted: string): Subject {
  const members = site.outputs.clusters ?? [];
  const profiles = [own.profile, ...members.filter((m) => m.name !== own.profile.name)];
  const names = profiles.map((p) => p.name).join(', ');
  if (wanted === 'auto')
    throw new UsageError(
      `--cluster auto places a run by its expected start; a shell names its cluster: one of ${names}`,
    );
  const profile = profiles.find((p) => p.name === wanted || p.clusterName === wanted);
  if (!profile)
    throw new UsageError(
      members.length === 0
        ? `--cluster ${wanted}: stack ${site.name} declares one cluster (${own.profile.name}); declare the site's others in its config's \`clusters\``
        : `--cluster ${wanted}: not a cluster of stack ${site.name}; expected one of ${names}`,
    );
  if (profile.name === own.profile.name) return own;
  const via = profile.clusterName;
  if (!own.spec || !own.stage) return { profile, via };
  let spec: Spec;
  try {
    spec = specFor(own.spec, profile);
  } catch (e) {
    throw new UsageError(
      `--cluster ${wanted}: the spec does not resolve on cluster ${profile.name}: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  const stage = spec.resolved.stages.find((s) => s.id === own.stage!.id)!;
  const environment = spec.resolved.environments[stage.environment];
  const problem = environment ? environmentClusterProblems(environment, profile)[0] : undefined;
  if (problem)
    throw new UsageError(`--cluster ${wanted}: environment ${stage.environment}: ${problem.message}`);
  return { profile, spec, stage, via };
}

/** The spec loaded (as `plan` loads it) and the stage the shell is of: named, or the spec's only one. */
async function stageOf(
  opts: ShellOptions,
  log: (line: string) => void,
): Promise<Required<Omit<Subject, 'via'>>> {
  const spec = await loadSpec({ ...opts, specPath: opts.specPath! }, log);
  logWarnings(spec, log);
  const stages = spec.resolved.stages;
  const ids = stages.map((s) => s.id).join(', ');
  if (opts.stageId === undefined && stages.length > 1)
    throw new UsageError(`--stage: spec ${spec.file} has ${stages.length} stages; name one of ${ids}`);
  const stage = opts.stageId === undefined ? stages[0]! : stages.find((s) => s.id === opts.stageId);
  if (!stage)
    throw new UsageError(
      `--stage ${opts.stageId}: spec ${spec.file} has no such stage; expected one of ${ids}`,
    );
  return { profile: spec.resolved.cluster, spec, stage };
}

/**
 * The cluster profile a stack was provisioned with, from its configuration (the workspace's
 * stacks/<stack>.yaml, read as the infra program reads it): a shell without a spec takes the
 * partitions from there.
 */
function stackProfile(opts: ShellOptions): ClusterProfile {
  const declared = readDeclaredSite(configsOf(opts), opts.stack);
  if (declared === undefined)
    throw new UsageError(
      `a shell without --spec takes the cluster profile from the stack's configuration, and ${declaredStackFile(configsOf(opts), opts.stack)} does not exist: pass --spec FILE.yaml [--stage ID]`,
    );
  return declared.site.profile;
}

/** The site of a shell without a spec: the stack's outputs, which must be of the profile read. */
async function siteOf(opts: ShellOptions, profile: ClusterProfile): Promise<Site> {
  const outputs = await opts.stackSource.read(opts.stack);
  if (outputs.profile !== profile.name)
    throw new Error(
      `stack ${opts.stack} was provisioned with cluster profile ${outputs.profile}, but its configuration (${declaredStackFile(configsOf(opts), opts.stack)}) declares ${profile.name}: run \`pulumi up\` on it, or pass --spec`,
    );
  const connection = outputs.connection;
  const remote = connection.kind === 'ssh';
  return {
    name: opts.stack,
    outputs,
    source: opts.stackSource,
    connection,
    runsRoot: remote ? localRunsRoot(configsOf(opts).workspace, opts.stack) : outputs.scratch.runsDir,
    ...(remote ? { files: new SiteFiles(sessionFor(connection)) } : {}),
    inputs: [],
  };
}

/**
 * What the shell stages, as the stage's job does; without a stage, as a job that stages nothing:
 * HPC_CACHE_ROOT (and the pipeline's own cache-root variable) at the scratch caches (of the stack's first dataset).
 */
function dataOf(outputs: StackOutputs, spec?: Spec, stage?: ResolvedStage): InteractiveShellInput['data'] {
  const pipeline = spec ? pipelineOf(spec.resolved) : defaultPipeline();
  const variable = pipeline.cacheRootVariable;
  const common = {
    cacheDirs: outputs.scratch.cacheDirs,
    stageDataScript: outputs.scripts.stageData,
    ...(variable !== undefined ? { cacheRootVariable: variable } : {}),
  };
  if (spec && stage)
    return {
      ...common,
      stage,
      staging: policiesOf(spec.resolved).staging,
      jobEnv: stageJobEnv(pipeline, outputs, stage),
    };
  const dataset = Object.keys(outputs.scratch.cacheDirs)[0];
  return dataset === undefined
    ? undefined
    : {
        ...common,
        stage: { stage: 'shell', dataset },
        staging: { enabled: false, datasets: [] },
        jobEnv: stageJobEnv(pipeline, outputs, { dataset }),
      };
}

function dataLine(data: InteractiveShellInput['data']): string {
  if (!data) return 'the stack has no dataset caches: nothing staged, no HPC_CACHE_ROOT';
  const { stage, staging, cacheDirs } = data;
  if (stage.stage === 'preprocess' || !staging.enabled)
    return `nothing staged (${stage.stage === 'preprocess' ? 'preprocess writes its cache to scratch' : 'staging is off'}): HPC_CACHE_ROOT is the scratch caches' directory, as for the job`;
  const datasets = staging.datasets.length > 0 ? staging.datasets : [stage.dataset];
  return `${datasets.map((d) => `${d} (${cacheDirs[d] ?? '?'})`).join(', ')} staged into the job's $TMPDIR, as the job stages it`;
}
