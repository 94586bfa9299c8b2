// `runner shell`'s flags: read as numbers and a SLURM time, each refused naming the flag (exit 2
// on the command line). What the shell does with them: libs/runs/src/shell/shell.test.ts.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { main } from '../cli/main.ts';
import { UsageError } from './kit.ts';
import { shellFlags } from './shell.ts';

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('not refused');
}

describe('the flags', () => {
  it('are read as numbers and a SLURM time, each refused naming the flag, the value and what was expected', () => {
    expect(shellFlags({ cpus: '4', 'mem-gb': '12.5', gpus: '0', time: '2:00:00', partition: 'cpu' })).toEqual(
      {
        cpus: 4,
        memGB: 12.5,
        gpus: 0,
        time: '2:00:00',
        partition: 'cpu',
      },
    );
    expect(refusal(() => shellFlags({ cpus: '0' }))).toBe('--cpus 0: expected a whole number >= 1');
    expect(refusal(() => shellFlags({ cpus: '2.5' }))).toBe('--cpus 2.5: expected a whole number >= 1');
    expect(refusal(() => shellFlags({ gpus: '-1' }))).toBe('--gpus -1: expected a whole number >= 0');
    expect(refusal(() => shellFlags({ 'mem-gb': 'lots' }))).toMatch(
      /^--mem-gb lots: expected a number of GB > 0/,
    );
    expect(refusal(() => shellFlags({ time: '2h' }))).toMatch(/^--time 2h: expected /);
    expect(refusal(() => shellFlags({ partition: 'gpu;reboot' }))).toMatch(
      /^--partition gpu;reboot: expected /,
    );
  });
});

describe('on the command line', () => {
  it('--stage goes with --spec (exit 2)', async () => {
    let err = '';
    const sink = new Writable({ write: (c, _e, cb) => ((err += String(c)), cb()) });
    expect(await main(['shell', '--stage', 'train'], { out: sink, err: sink })).toBe(2);
    expect(err).toMatch(/--stage names a stage of a spec: pass --spec FILE\.yaml too/);
  });
});
