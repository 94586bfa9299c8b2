// `kdgat-runner init [DIR]`: a starting workspace for a researcher's existing repository. What can be
// read from the repository is filled in (its name, Python, lock or requirements, the CLI module and
// the words its argparse parser takes, Lightning, its CSVLogger and ModelCheckpoint, a raw-data
// variable); each value it cannot know is written as a line marked `TODO(kdgat-hpc)`. Nothing that
// exists is overwritten, and nothing is written unless every file can be.
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';
import { stringify } from 'yaml';
import { parseToml, type TomlTable } from '../environment/toml.ts';
import { WORKSPACE_FILE } from './workspace.ts';

export const TODO = 'TODO(kdgat-hpc)';

/** What init read from the repository (printed, and tested). */
export interface Detected {
  name: string;
  python?: string;
  lock?: 'uv.lock' | string;
  requirements?: string;
  cliModule?: string;
  cliFile?: string;
  flags: string[];
  stagePositional: boolean;
  choices: Partial<Record<'stage' | 'model' | 'scale', string[]>>;
  overrides?: 'dash-O' | 'hydra' | 'flags';
  outputFlag?: string;
  lightning: boolean;
  csvLogger?: { name: string; versioned: boolean };
  checkpointDir?: string;
  metricsFile?: string;
  rawDataVariable?: string;
  pythonPath: string[];
}

export interface InitResult {
  root: string;
  detected: Detected;
  files: { path: string; todos: number }[];
}

export class InitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InitError';
  }
}

function pythonFiles(dir: string, out: string[] = [], depth = 0): string[] {
  if (depth > 6) return out;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (
      entry.name.startsWith('.') ||
      ['node_modules', '__pycache__', 'venv', 'build', 'dist'].includes(entry.name)
    )
      continue;
    const p = join(dir, entry.name);
    if (entry.isDirectory()) pythonFiles(p, out, depth + 1);
    else if (entry.isFile() && entry.name.endsWith('.py')) out.push(p);
  }
  return out;
}

const stringList = (text: string): string[] | undefined => {
  const items = [...text.matchAll(/["']([A-Za-z0-9_.-]+)["']/g)].map((m) => m[1]!);
  return items.length > 0 ? items : undefined;
};

/** The `choices=[…]` of `add_argument(NAME …)` when they are a literal list, or a list defined in the file. */
function choicesOf(source: string, names: string[]): string[] | undefined {
  for (const name of names) {
    const call = new RegExp(`add_argument\\(\\s*["']${name}["']([^)]*)\\)`, 's').exec(source);
    if (!call) continue;
    const literal = /choices\s*=\s*\[([^\]]*)\]/.exec(call[1]!);
    if (literal) return stringList(literal[1]!);
    const named = /choices\s*=\s*(?:list\()?([A-Z_][A-Z0-9_]*)/.exec(call[1]!);
    if (named) {
      const def = new RegExp(`^${named[1]}\\s*=\\s*[\\[({]([^\\])}]*)[\\])}]`, 'm').exec(source);
      if (def) return stringList(def[1]!.replace(/:\s*[^,]+/g, ''));
    }
  }
  return undefined;
}

/** Reads what init can know of the repository at `root`. */
export function detectProject(root: string): Detected {
  const pyproject = join(root, 'pyproject.toml');
  let project: TomlTable = {};
  if (existsSync(pyproject)) {
    const toml = parseToml(readFileSync(pyproject, 'utf8'), pyproject);
    project = (toml['project'] as TomlTable | undefined) ?? {};
  }
  const name = typeof project['name'] === 'string' ? project['name'] : basename(root);
  const requires = typeof project['requires-python'] === 'string' ? project['requires-python'] : '';
  const python = /(?:>=|==|~=)\s*(3\.\d+)/.exec(requires)?.[1];
  const requirements = readdirSync(root).find((f) => /^requirements.*\.txt$/.test(f));
  const pkg = name.replace(/[-.]+/g, '_').toLowerCase();
  const files = pythonFiles(root);
  const srcLayout = existsSync(join(root, 'src'));
  const moduleOf = (file: string) =>
    relative(srcLayout && file.startsWith(join(root, 'src') + sep) ? join(root, 'src') : root, file)
      .replace(/\.py$/, '')
      .replace(/\/__main__$/, '')
      .split(sep)
      .join('.');
  const isCli = (f: string) =>
    /(^|\/)(cli|__main__|main)\.py$/.test(f) &&
    /add_argument|ArgumentParser|typer|click/.test(readFileSync(f, 'utf8'));
  const candidates = files.filter(isCli).sort((a, b) => {
    const rank = (f: string) =>
      (moduleOf(f).startsWith(pkg) ? 0 : 1) * 10 + (f.endsWith('__main__.py') ? 1 : 0);
    return rank(a) - rank(b) || a.length - b.length;
  });
  const cliFile = candidates[0];
  const cli = cliFile ? readFileSync(cliFile, 'utf8') : '';
  const flags = [
    ...cli.matchAll(/add_argument\(\s*(?:["']-[A-Za-z]["']\s*,\s*)?["'](--[A-Za-z0-9-]+)["']/g),
  ].map((m) => m[1]!);
  const shortO = /add_argument\(\s*["']-O["']/.test(cli);
  const stagePositional = /add_subparsers|add_argument\(\s*["']stage["']/.test(cli);
  const all = files.map((f) => readFileSync(f, 'utf8')).join('\n');
  const lightning = /^\s*(?:import|from)\s+(?:lightning|pytorch_lightning)\b/m.test(all);
  // The logger's construction (not a subclass's `class X(CSVLogger):`), the one with arguments first.
  const csvCalls = [...all.matchAll(/(class\s+\w+\s*\(\s*)?\b\w*CSVLogger\(([^)]*)\)/g)].filter((m) => !m[1]);
  const csvCall = csvCalls.find((m) => /=/.test(m[2]!)) ?? csvCalls[0];
  const csv = csvCall ? [csvCall[0], csvCall[2]!] : null;
  const csvName = csv
    ? (/name\s*=\s*["']([A-Za-z0-9_.-]*)["']/.exec(csv[1]!)?.[1] ?? 'lightning_logs')
    : undefined;
  const csvVersioned = csv ? !/version\s*=\s*["']["']/.test(csv[1]!) : false;
  const ckpt = /ModelCheckpoint\([^)]*dirpath\s*=\s*[^,)]*["']([A-Za-z0-9_.-]+)["']/.exec(all)?.[1];
  const metricsFile = /["']([A-Za-z0-9_-]*metrics[A-Za-z0-9_-]*\.json)["']/.exec(all)?.[1];
  const rawDataVariable = [
    ...all.matchAll(/(?:environ(?:\.get)?\s*[[(]\s*|getenv\(\s*)["']([A-Z][A-Z0-9_]*)["']/g),
  ]
    .map((m) => m[1]!)
    .find((v) => /DATA|RAW/.test(v) && !/CACHE/.test(v));
  const outputFlag = ['--output-dir', '--out-dir', '--outdir', '--run-dir', '--output', '--save-dir'].find(
    (f) => flags.includes(f),
  );
  const overrides: Detected['overrides'] = shortO
    ? 'dash-O'
    : /nargs\s*=\s*["'][*+]["'][^)]*key=value|metavar\s*=\s*["']key=value/.test(cli)
      ? 'hydra'
      : undefined;
  const choices: Detected['choices'] = {};
  for (const [key, names] of [
    ['stage', ['stage']],
    ['model', ['--model']],
    ['scale', ['--scale']],
  ] as const) {
    const c = choicesOf(cli, [...names]);
    if (c) choices[key] = c;
  }
  if (!choices.stage && /add_subparsers/.test(cli)) {
    const subs = [...cli.matchAll(/add_parser\(\s*["']([A-Za-z0-9_-]+)["']/g)].map((m) => m[1]!);
    if (subs.length > 0) choices.stage = subs.filter((s) => s !== 'schema');
  }
  return {
    name,
    ...(python ? { python } : {}),
    ...(existsSync(join(root, 'uv.lock')) ? { lock: 'uv.lock' } : {}),
    ...(requirements ? { requirements } : {}),
    ...(cliFile ? { cliModule: moduleOf(cliFile), cliFile: relative(root, cliFile) } : {}),
    flags,
    stagePositional,
    choices,
    ...(overrides ? { overrides } : {}),
    ...(outputFlag ? { outputFlag } : {}),
    lightning,
    ...(csvName !== undefined ? { csvLogger: { name: csvName, versioned: csvVersioned } } : {}),
    ...(ckpt ? { checkpointDir: ckpt } : {}),
    ...(metricsFile ? { metricsFile } : {}),
    ...(rawDataVariable ? { rawDataVariable } : {}),
    pythonPath: srcLayout ? ['src'] : ['.'],
  };
}

/** YAML of `value` with a comment line above it. */
const todo = (what: string) => `# ${TODO}: ${what}`;

function pipelineText(d: Detected, codePath: string): string {
  const lines: string[] = [
    `# How kdgat-hpc runs ${d.name}. Written by \`kdgat-runner init\` from what the repository says;`,
    `# every line marked ${TODO} is a value it could not know: fill it in, then \`kdgat-runner plan\`.`,
    `name: ${d.name}`,
    '# The code the jobs run: this git repository (a site receives its committed tree).',
    `code: ${JSON.stringify({ path: codePath, pythonPath: d.pythonPath })}`,
  ];
  const words = ['python', '-m', d.cliModule ?? 'your_package.cli'];
  if (!d.cliModule)
    lines.push(todo('the module your jobs run (python -m MODULE): none with an argparse parser was found'));
  if (d.stagePositional) words.push('{stage}');
  for (const f of ['model', 'scale', 'dataset'] as const)
    if (d.flags.includes(`--${f}`)) words.push(`--${f}`, `{${f}}`);
  if (d.outputFlag) words.push(d.outputFlag, '{run_dir}');
  lines.push(
    '# One word per argv entry; {stage} {model} {scale} {dataset} are filled when the script is rendered,',
    "# {run_dir} (the stage's own directory in the run) when the job starts.",
  );
  if (!d.outputFlag)
    lines.push(todo("the words that tell your CLI where to write (e.g. --output-dir, '{run_dir}')"));
  for (const f of ['model', 'scale', 'dataset'] as const)
    if (!d.flags.includes(`--${f}`)) lines.push(todo(`how your CLI takes the ${f} ('{${f}}'), if it does`));
  lines.push(`command: ${JSON.stringify(words)}`);
  for (const key of ['stage', 'model', 'scale'] as const) {
    const field = `${key}s`;
    const c = d.choices[key];
    if (!c) lines.push(todo(`the ${field} your CLI accepts`));
    lines.push(
      `${field}: ${JSON.stringify(c ?? [key === 'stage' ? 'train' : key === 'model' ? 'default' : 'small'])}`,
    );
  }
  if (!d.overrides)
    lines.push(
      todo(
        'how an override reaches your CLI: hydra (key=value), dash-O (-O key value) or flags (--key value)',
      ),
    );
  lines.push(`overrides: ${d.overrides ?? 'hydra'}`);
  lines.push(
    d.lightning
      ? "# Lightning's SLURMEnvironment(auto_requeue=True): it saves hpc_ckpt_<n>.ckpt on SIGUSR1 and requeues itself."
      : todo(
          'handshake, lightning or none: how your code survives the time limit (none: the runner resubmits it)',
        ),
  );
  lines.push(`requeue: ${d.lightning ? 'lightning' : 'none'}`);
  if (d.rawDataVariable)
    lines.push(
      `# Your code reads its raw data through $${d.rawDataVariable}: the job sets it from the stack's datasets.`,
      todo(
        `points: root if it reads $${d.rawDataVariable}/<dataset>, dataset if it is the data set's own folder`,
      ),
      `rawData: { variable: ${d.rawDataVariable}, points: root }`,
    );
  else
    lines.push(todo('rawData: { variable: YOUR_DATA_VARIABLE } if your code finds its raw data through one'));
  const outputs: Record<string, unknown> = {};
  if (d.metricsFile) outputs['metrics'] = d.metricsFile;
  else lines.push(todo('outputs.metrics: the JSON file of final scores your code writes in its run dir'));
  const ckpts = [
    d.checkpointDir ? `${d.checkpointDir}/last.ckpt` : undefined,
    d.lightning ? 'hpc_ckpt_*.ckpt' : undefined,
  ].filter((c): c is string => c !== undefined);
  if (ckpts.length > 0) outputs['checkpoint'] = ckpts;
  else lines.push(todo('outputs.checkpoint: the file(s) a resubmitted job resumes from'));
  if (d.csvLogger) {
    const dir = d.csvLogger.name === '' ? '' : `${d.csvLogger.name}/`;
    outputs['history'] = d.csvLogger.versioned ? `${dir}version_*/metrics.csv` : `${dir}metrics.csv`;
    lines.push("# Lightning's CSVLogger: one version_<n> folder per attempt, merged in order.");
  } else lines.push(todo('outputs.history: a per-epoch CSV with an epoch column, for the report'));
  lines.push(`outputs: ${JSON.stringify(outputs)}`);
  return `${lines.join('\n')}\n`;
}

function environmentText(d: Detected, lockPath: string | undefined, reqPath: string | undefined): string {
  const lines = [
    `# ${d.name}'s environment on a site, built by \`kdgat-runner infra up\` from its own lock.`,
    `name: ${d.name}`,
    'backend: venv',
  ];
  if (!d.python) lines.push(todo("the Python version (pyproject.toml's requires-python names none)"));
  lines.push(`python: '${d.python ?? '3.11'}'`);
  if (lockPath) {
    lines.push('pipelinePins: true', `pipelineLock: ${JSON.stringify({ file: lockPath, project: d.name })}`);
  } else if (reqPath) {
    lines.push(
      todo(
        `${reqPath} is read as the pins: every line name==version (uv export or pip-compile writes it so)`,
      ),
      'pipelinePins: true',
      `pipelineLock: ${JSON.stringify({ file: reqPath })}`,
    );
  } else {
    lines.push(todo('no uv.lock or requirements file: run `uv lock` in your repository and name it here'));
  }
  lines.push(
    "# The site modules the interpreter needs, loaded in this order (after the cluster profile's) for the",
    '# build and before every activation; at OSC a uv venv needs the Python it was made with:',
    '# modules: [python/3.12]',
  );
  return `${lines.join('\n')}\n`;
}

function stackText(envFile: string, d: Detected): string {
  return [
    '# A stack: one site and what it provides (Pulumi stack config, namespace kdgat-hpc).',
    '#   kdgat-runner infra up --stack local      provisions it; kdgat-runner plan --spec … --stack local',
    '# For OSC: copy this file to stacks/osc-pitzer.yaml with `kdgat-hpc:cluster: osc-pitzer` and',
    '# clusterOverrides.connection (your user, the host key) — see the kdgat-hpc README.',
    'config:',
    '  kdgat-hpc:cluster: local',
    '  kdgat-hpc:environments:',
    `    - file: ${envFile}`,
    `  ${todo('the data sets your specs name, and where the site keeps their raw data')}`,
    '  kdgat-hpc:datasets: []',
    ...(d.rawDataVariable
      ? [`  # kdgat-hpc:rawDataRoot: /path/to/raw   # exported as $${d.rawDataVariable}`]
      : []),
    '',
  ].join('\n');
}

function specText(d: Detected, pipelineFile: string, envFile: string): string {
  const stage = d.choices.stage?.[0] ?? 'train';
  return [
    `# One ${stage} run of ${d.name}: kdgat-runner plan --spec ${'hpc/specs'}/${d.name}.yaml --stack local`,
    `name: ${d.name}-${stage}`,
    'cluster: local',
    `environment: ../${basename(envFile)}`,
    `pipeline: ../${basename(pipelineFile)}`,
    'stages:',
    `  - id: ${stage}`,
    `    stage: ${stage}`,
    `    model: ${d.choices.model?.[0] ?? 'default'}`,
    `    scale: ${d.choices.scale?.[0] ?? 'small'}`,
    `    ${todo("a data set of the stack's datasets")}`,
    '    dataset: your-dataset',
    '    resources: { cpus: 2, memGB: 8, gpus: { count: 0 }, time: "1:00:00" }',
    '',
  ].join('\n');
}

/** Writes a starting workspace at `root` (an existing repository); refuses if any file it writes exists. */
export function initWorkspace(root: string): InitResult {
  if (!existsSync(root) || !statSync(root).isDirectory())
    throw new InitError(`${root}: no such directory (init writes a workspace into an existing repository)`);
  const d = detectProject(root);
  const hpc = join(root, 'hpc');
  const pipelineFile = join(hpc, `${d.name}.pipeline.yaml`);
  const envFile = join(hpc, `${d.name}.environment.yaml`);
  const specFile = join(hpc, 'specs', `${d.name}.yaml`);
  const stackFile = join(root, 'stacks', 'local.yaml');
  const wsText = [
    `# kdgat-hpc workspace of ${d.name} (written by \`kdgat-runner init\`): every relative path in a stack`,
    '# file resolves against this folder; the runner keeps its local files in .hpc/ (ignored by itself).',
    stringify({ stacks: 'stacks', state: '.hpc/pulumi-state' }).trimEnd(),
    '',
  ].join('\n');
  const texts: [string, string][] = [
    [join(root, WORKSPACE_FILE), wsText],
    [stackFile, stackText(relative(root, envFile), d)],
    [pipelineFile, pipelineText(d, relative(hpc, root) || '.')],
    [envFile, environmentText(d, d.lock ? relative(root, join(root, d.lock)) : undefined, d.requirements)],
    [specFile, specText(d, pipelineFile, envFile)],
  ];
  const taken = texts.filter(([p]) => existsSync(p)).map(([p]) => relative(root, p));
  if (taken.length > 0)
    throw new InitError(
      `init writes nothing over what exists: ${taken.join(', ')} already there (move it, or edit it by hand)`,
    );
  for (const [p, text] of texts) {
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, text, { flag: 'wx' });
  }
  return {
    root,
    detected: d,
    files: texts.map(([p, text]) => ({ path: relative(root, p), todos: text.split(TODO).length - 1 })),
  };
}
