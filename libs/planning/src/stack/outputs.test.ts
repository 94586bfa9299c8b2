import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileStackOutputs, StackNotProvisionedError, checkEnvironmentMatches } from './outputs.ts';
import { loadEnvironmentSpec } from '@kdgat/config';
import { outputsFor, sampleOutputs } from '../testing.ts';

describe('FileStackOutputs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'runner-stack-'));

  it('reads one stack, or the named stack of a map of stacks', async () => {
    const one = join(dir, 'one.json');
    writeFileSync(one, JSON.stringify(sampleOutputs));
    expect((await new FileStackOutputs(one).read('local')).scratch.runsDir).toBe('/s/runs');
    const many = join(dir, 'many.json');
    writeFileSync(many, JSON.stringify({ 'osc-pitzer': sampleOutputs }));
    expect((await new FileStackOutputs(many).read('osc-pitzer')).environments[0]!.name).toBe('cpu-local');
    await expect(new FileStackOutputs(many).read('local')).rejects.toThrow(
      /run `pulumi up` on stack local first/,
    );
  });

  it('refuses outputs missing a field, naming it', async () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ ...sampleOutputs, scratch: { root: '/s' } }));
    await expect(new FileStackOutputs(bad).read('local')).rejects.toThrow(/lack scratch\.cacheDirs/);
  });
});

describe('checkEnvironmentMatches', () => {
  const cpuLocal = loadEnvironmentSpec('cpu-local');
  const outputs = outputsFor({ environments: { 'cpu-local': cpuLocal } });

  it('passes when the stack has every environment the stages use, from the same spec', () => {
    expect(() => checkEnvironmentMatches('local', outputs, { 'cpu-local': cpuLocal })).not.toThrow();
  });

  it('refuses an environment the stack does not have, naming what it has and where to declare it', () => {
    const rapids = loadEnvironmentSpec('gnn-rapids');
    expect(() =>
      checkEnvironmentMatches('osc-pitzer', outputs, { 'cpu-local': cpuLocal, 'gnn-rapids': rapids }),
    ).toThrow(
      /stack osc-pitzer has environment\(s\) cpu-local, but the experiment asks for gnn-rapids: add it to kdgat-hpc:environments in stacks\/osc-pitzer\.yaml/,
    );
  });

  it('refuses a stack provisioned from another spec of the same name', () => {
    const other = { ...cpuLocal, requirements: ['optuna==4.1.0'] } as typeof cpuLocal;
    expect(() => checkEnvironmentMatches('local', outputs, { 'cpu-local': other })).toThrow(
      StackNotProvisionedError,
    );
    expect(() => checkEnvironmentMatches('local', outputs, { 'cpu-local': other })).toThrow(
      /provisioned with environment cpu-local \(spec hash [0-9a-f]{12}\), but the experiment asks for another cpu-local/,
    );
  });
});
