import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { condaEnv, pitzer, pitzerJob, stage as stageOf } from './fixtures.test-support.ts';
import type { Scalar } from './inputs.ts';
import { TemplateInputError } from './quote/errors.ts';
import { renderEpilog } from './epilog/render-epilog.ts';
import { renderSiteScripts } from './site/render-site-scripts.ts';
import { jobInput, makeSite, type SandboxSite } from './test-support/job-harness.ts';
import {
  bashSyntax,
  makeSandbox,
  recordedCalls,
  runBash,
  shellcheck,
  type Sandbox,
} from './test-support/sandbox.ts';
import { renderTrainJob, type TrainJobInput } from './train-job/render-train-job.ts';

// Property-based safety: specs whose free-text fields carry shell syntax render to scripts that parse,
// pass shellcheck, and when run (stub tools record argv) deliver that text as data: the canary file
// the payloads try to create never appears.
let sb: Sandbox;
let site: SandboxSite;
beforeAll(() => {
  sb = makeSandbox();
  site = makeSite(sb);
});
afterAll(() => sb.cleanup());

const CANARY = '@CANARY@';
const payloads = [
  `$(touch ${CANARY})`,
  `\`touch ${CANARY}\``,
  `'; touch ${CANARY}; '`,
  `"; touch ${CANARY}; "`,
  `\ntouch ${CANARY}\n`,
  `&& touch ${CANARY}`,
  `| touch ${CANARY} #`,
  `$'\\x27'; touch ${CANARY}`,
  `\${IFS}touch\${IFS}${CANARY}`,
  `\\'; touch ${CANARY}`,
  '* ? [a-z] {a,b} ~root',
  'ünïçødé 🚀 ﷽ \u202e',
  '\r\t\\n\\t%s%n',
  '-O x y --run-root /etc',
];
const noNul = (s: string) => !s.includes('\0');
const hostileText = fc
  .oneof(
    fc.constantFrom(...payloads),
    fc
      .tuple(
        fc.string({ unit: 'binary', maxLength: 8 }),
        fc.constantFrom(...payloads),
        fc.string({ unit: 'grapheme', maxLength: 8 }),
      )
      .map((p) => p.join('')),
    fc.string({ unit: 'binary', maxLength: 24 }),
  )
  .filter(noNul);
/** A path component: hostile text without '/' and within the 255-byte name limit. */
const hostileName = hostileText
  .map((s) => s.replaceAll('/', '_').slice(0, 60))
  .filter((s) => s !== '' && s !== '.' && s !== '..' && Buffer.byteLength(s) < 200);

const withCanary = (s: string) => s.replaceAll(CANARY, sb.canary);
const scalar: fc.Arbitrary<Scalar> = fc.oneof(
  hostileText,
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
);
const textOf = (v: Scalar) => (v === null ? 'null' : typeof v === 'boolean' ? String(v) : String(v));

const spec = fc.record({
  experiment: hostileText,
  overrides: fc.dictionary(fc.constantFrom('training.lr', 'model.name', 'data.note', 'kd.alpha'), scalar, {
    maxKeys: 3,
  }),
  runDirName: hostileName,
  cacheDirName: hostileName,
  envDirName: hostileName,
  hint: hostileText,
  sweep: fc.option(
    fc.array(
      fc.dictionary(fc.constantFrom('training.lr', 'model.name'), scalar, { minKeys: 1, maxKeys: 2 }),
      { minLength: 1, maxLength: 4 },
    ),
    { nil: undefined },
  ),
});

let counter = 0;
describe('rendered scripts with hostile values', () => {
  it('parse, pass shellcheck, and deliver every hostile value to the tools as data', () => {
    const rendered: string[] = [];
    fc.assert(
      fc.property(spec, (s) => {
        const n = ++counter;
        const id = `case${n}`;
        const cacheDir = `${sb.dir}/cache-${n}/${withCanary(s.cacheDirName)}`;
        mkdirSync(cacheDir, { recursive: true });
        writeFileSync(join(cacheDir, 'graphs.pt'), 'graphs');
        const runRoot = `${sb.dir}/runs-${n}/${withCanary(s.runDirName)}`;
        const envPrefix = `${sb.dir}/envs/${withCanary(s.envDirName)}`;
        const hint = withCanary(s.hint);
        const epilog = sb.write(`${id}/job_epilog.sh`, renderEpilog({ ...pitzer, postJobHint: hint }));
        const overrides = Object.fromEntries(
          Object.entries(s.overrides).map(([k, v]) => [k, typeof v === 'string' ? withCanary(v) : v]),
        );
        const sweep = s.sweep?.map((p) =>
          Object.fromEntries(
            Object.entries(p).map(([k, v]) => [k, typeof v === 'string' ? withCanary(v) : v]),
          ),
        );
        const base = jobInput(site);
        const input: TrainJobInput = {
          ...base,
          experiment: withCanary(s.experiment),
          stage: { ...base.stage, overrides },
          environment: { name: 'gnn-rapids', backend: 'conda', prefix: envPrefix },
          layout: { ...site.layout, cacheDirs: { hcrl_sa: cacheDir } },
          runRoot,
          scripts: { stageData: site.scripts.stageData, epilog },
          ...(sweep ? { sweepPoints: sweep, arrayTablePath: `${sb.dir}/${id}/array.tsv` } : {}),
        };
        const job = renderTrainJob(input);
        const script = sb.write(`${id}/job.sh`, job.script, 0o755);
        if (job.arrayTable !== undefined) writeFileSync(`${sb.dir}/${id}/array.tsv`, job.arrayTable);
        rendered.push(script, epilog);

        const log = join(sb.dir, id, 'log');
        mkdirSync(log);
        const r = runBash(script, [], {
          cwd: join(sb.dir, id),
          env: sb.env({
            STUB_LOG: log,
            SLURM_JOB_ID: String(n),
            ...(sweep ? { SLURM_ARRAY_TASK_ID: String(sweep.length - 1) } : {}),
          }),
        });
        expect(r.status, r.stderr).toBe(0);
        expect(existsSync(sb.canary)).toBe(false);
        const point = sweep?.at(-1) ?? {};
        const expected = [
          '-m',
          'kdgat',
          'autoencoder',
          '--model',
          'vgae',
          '--scale',
          'large',
          '--dataset',
          'hcrl_sa',
          '--run-root',
          sweep ? `${runRoot}/point_${sweep.length - 1}` : runRoot,
          ...Object.entries(overrides).flatMap(([k, v]) => ['-O', k, textOf(v)]),
          ...Object.entries(point).flatMap(([k, v]) => ['-O', k, textOf(v)]),
        ];
        expect(recordedCalls(log, 'python')).toEqual([expected]);
        expect(recordedCalls(log, 'conda')).toEqual([['activate', envPrefix]]);
        expect(r.stdout).toContain(
          `next:             ${hint.replaceAll('{cluster}', 'pitzer').replaceAll('{jobid}', String(n))}\n`,
        );
        expect(r.stdout).toContain(`kdgat-hpc: experiment ${withCanary(s.experiment)}, stage autoencoder`);
      }),
      { numRuns: 25, seed: Number(process.env.HPC_FC_SEED ?? 20261122) },
    );
    expect(bashSyntax(rendered)).toBe('');
    expect(shellcheck(rendered)).toBe('');
  });

  it('site scripts with hostile paths and hints pass bash -n and shellcheck', () => {
    const files: string[] = [];
    fc.assert(
      fc.property(hostileName, hostileName, hostileText, (a, b, hint) => {
        const root = `/scratch/${a}`;
        const scripts = renderSiteScripts(
          { ...pitzer, postJobHint: hint },
          { ...condaEnv, prefix: `/envs/${b}` },
          {
            root,
            cacheDirs: { hcrl_sa: `${root}/cache/hcrl_sa` },
            runsDir: `${root}/runs`,
            logsDir: '/scratch/logs',
          },
          { scriptsDir: `/opt/${b}` },
        );
        const n = ++counter;
        for (const [name, text] of Object.entries(scripts)) files.push(sb.write(`site${n}/${name}`, text));
      }),
      { numRuns: 15, seed: 11 },
    );
    expect(bashSyntax(files)).toBe('');
    expect(shellcheck(files)).toBe('');
  });

  it('values sbatch or a directory name would read are refused by name, never rendered', () => {
    const fields: [string, (v: string) => TrainJobInput][] = [
      ['profile.account', (v) => pitzerJob({ profile: { ...pitzer, account: v } })],
      [
        'resources.partition',
        (v) =>
          pitzerJob({
            stage: { ...pitzerJob().stage, resources: { ...pitzerJob().stage.resources, partition: v } },
          }),
      ],
      ['layout.logsDir', (v) => pitzerJob({ layout: { ...pitzerJob().layout, logsDir: `/x/${v}` } })],
      ['profile.modules.cuda', (v) => pitzerJob({ profile: { ...pitzer, modules: { cuda: v } } })],
      [
        'stage.dataset',
        (v) => pitzerJob({ stage: stageOf({ id: 'a', stage: 'autoencoder', model: 'vgae', dataset: v }) }),
      ],
      ['stage.overrides key', (v) => pitzerJob({ stage: { ...pitzerJob().stage, overrides: { [v]: 1 } } })],
      [
        'resources.time',
        (v) =>
          pitzerJob({
            stage: { ...pitzerJob().stage, resources: { ...pitzerJob().stage.resources, time: v } },
          }),
      ],
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...fields),
        hostileText.filter((s) => /[^A-Za-z0-9._-]/.test(s)),
        ([field, make], value) => {
          let error: unknown;
          try {
            renderTrainJob(make(value));
          } catch (e) {
            error = e;
          }
          expect(error).toBeInstanceOf(TemplateInputError);
          expect(
            (error as TemplateInputError).field.startsWith(field.replace(/\[0\]$/, '')) ||
              (error as TemplateInputError).field === field,
          ).toBe(true);
        },
      ),
      { numRuns: 150, seed: 5 },
    );
  });
});
