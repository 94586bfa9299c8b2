import { spawnSync } from 'node:child_process';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TemplateInputError } from './errors.ts';
import { shq } from './shq.ts';

/** What bash makes of each quoted word: one `printf '%s\0' <word>` per value, read back NUL-separated. */
function bashReadsBack(values: string[]): string[] {
  const script = values.map((v) => `printf '%s\\0' ${shq(v)}`).join('\n');
  const r = spawnSync('bash', ['-c', script], {
    encoding: 'utf8',
    cwd: '/',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
  });
  expect(r.stderr).toBe('');
  const out = r.stdout.split('\0');
  out.pop();
  return out;
}

describe('shq', () => {
  it('leaves plain words bare and quotes everything else', () => {
    expect(shq('hcrl_sa')).toBe('hcrl_sa');
    expect(shq('/fs/scratch/PAS1266/kd-gat')).toBe('/fs/scratch/PAS1266/kd-gat');
    expect(shq(0.001)).toBe('0.001');
    expect(shq('')).toBe("''");
    expect(shq('two words')).toBe("'two words'");
    expect(shq('*')).toBe("'*'");
    expect(shq("it's $(x)")).toBe("$'it\\'s $(x)'");
    expect(shq('a\nb')).toBe("$'a\\x0ab'");
  });

  it('rejects what no shell word can carry', () => {
    expect(() => shq('a\0b')).toThrow(TemplateInputError);
    expect(() => shq(Number.NaN)).toThrow(/value = null: expected a finite number/);
  });

  it('bash reads every quoted string back exactly (hostile and arbitrary unicode text)', () => {
    const hostile = [
      '$(touch /tmp/x)',
      '`id`',
      "'; rm -rf / ; '",
      '"$HOME"',
      'a\nb\r\tc',
      '&& ls',
      '*?[a]{b,c}~',
      '\\',
      "\\'",
      '\x01\x7f',
      'ünï 🚀 ﷽',
      '-n',
      '--',
      '!!',
      '$1 ${x:-y}',
    ];
    const random = fc.sample(
      fc.string({ unit: 'binary', maxLength: 40 }).filter((s) => !s.includes('\0')),
      { numRuns: 400, seed: 42 },
    );
    const values = [...hostile, ...random];
    expect(bashReadsBack(values)).toEqual(values);
  });

  it('numbers come back as their JavaScript text', () => {
    const nums = fc.sample(fc.double({ noNaN: true, noDefaultInfinity: true }), { numRuns: 100, seed: 7 });
    expect(bashReadsBack(nums.map(String))).toEqual(nums.map(String));
    expect(nums.map((n) => shq(n))).toEqual(nums.map(String));
  });
});
