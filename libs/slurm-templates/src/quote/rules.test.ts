// The templates guard every value with the rule validation uses (SCRIPT_VALUES of @kdgat/config):
// what a spec can pass, the templates render, and what they refuse, validation already refused
// with the same words.
import { ClusterProfileSchema, ExperimentSpecSchema, PartitionSchema, SCRIPT_VALUES } from '@kdgat/config';
import { describe, expect, it } from 'vitest';
import { pitzer, pitzerJob } from '../fixtures.test-support.ts';
import { renderTrainJob } from '../train-job/render-train-job.ts';
import { TemplateInputError } from './errors.ts';

function refusal(run: () => unknown): TemplateInputError {
  try {
    run();
  } catch (e) {
    if (e instanceof TemplateInputError) return e;
    throw e;
  }
  throw new Error('expected the template to refuse');
}

const base = pitzerJob();
const cases: {
  field: string;
  rule: keyof typeof SCRIPT_VALUES;
  render: (v: string) => unknown;
  validate: (v: string) => boolean;
}[] = [
  {
    field: 'profile.account',
    rule: 'account',
    render: (v) => renderTrainJob(pitzerJob({ profile: { ...pitzer, account: v } })),
    validate: (v) => ExperimentSpecSchema.shape.account.safeParse(v).success,
  },
  {
    field: 'profile.modules.cuda',
    rule: 'moduleName',
    render: (v) =>
      renderTrainJob(pitzerJob({ profile: { ...pitzer, modules: { ...pitzer.modules, cuda: v } } })),
    validate: (v) => ClusterProfileSchema.shape.modules.safeParse({ cuda: v }).success,
  },
  {
    field: 'resources.gpus.type',
    rule: 'gpuType',
    render: (v) =>
      renderTrainJob(
        pitzerJob({
          stage: { ...base.stage, resources: { ...base.stage.resources, gpus: { count: 1, type: v } } },
        }),
      ),
    validate: (v) => PartitionSchema.shape.gpuType.safeParse(v).success,
  },
  {
    field: 'requeue.signal',
    rule: 'requeueSignal',
    render: (v) => renderTrainJob(pitzerJob({ requeue: { ...base.requeue, signal: v } })),
    validate: (v) => ExperimentSpecSchema.shape.requeue.safeParse({ signal: v }).success,
  },
];

describe('one rule per value, in validation and in the templates', () => {
  for (const c of cases) {
    it(`${c.field}: refused by both, with the rule's words`, () => {
      for (const bad of ['-rf', 'a b', '$(id)', ...(c.rule === 'requeueSignal' ? ['TERM', 'INT'] : [])]) {
        expect(c.validate(bad), `validation accepts ${bad}`).toBe(false);
        const e = refusal(() => c.render(bad));
        expect(e.field).toBe(c.field);
        expect(e.expected).toBe(SCRIPT_VALUES[c.rule].expected);
      }
    });
  }

  it('values validation accepts are rendered', () => {
    expect(() => cases[0]!.render('PAS1266')).not.toThrow();
    expect(() => cases[1]!.render('cuda/12.4.1')).not.toThrow();
    expect(() => cases[2]!.render('v100')).not.toThrow();
    expect(() => cases[3]!.render('USR2')).not.toThrow();
  });
});
