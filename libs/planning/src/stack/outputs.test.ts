import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  FileStackOutputs,
  StackNotProvisionedError,
  checkEnvironmentMatches,
} from './outputs.ts';
import { sampleOutputs } from '../testing.ts';

describe('FileStackOutputs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'runner-stack-'));

  it('reads one stack, or the named stack of a map of stacks', async () => {
    const one = join(dir, 'one.json');
    writeFileSync(one, JSON.stringify(sampleOutputs));
    expect((await new FileStackOutputs(one).read('local')).scratch.runsDir).toBe('/s/runs');
    const many = join(dir, 'many.json');
    writeFileSync(many, JSON.stringify({ 'osc-pitzer': sampleOutputs }));
    expect((await new FileStackOutputs(many).read('osc-pitzer')).environment.name).toBe('cpu-local');
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
  it('refuses a stack provisioned from another environment spec', () => {
    expect(() => checkEnvironmentMatches('osc-pitzer', sampleOutputs, 'gnn-rapids', 'c'.repeat(64))).toThrow(
      StackNotProvisionedError,
    );
    expect(() => checkEnvironmentMatches('osc-pitzer', sampleOutputs, 'gnn-rapids', 'c'.repeat(64))).toThrow(
      /provisioned with environment cpu-local .* asks for gnn-rapids .*: run `pulumi up` on stack osc-pitzer first/,
    );
    expect(() => checkEnvironmentMatches('local', sampleOutputs, 'cpu-local', 'a'.repeat(64))).not.toThrow();
  });
});
