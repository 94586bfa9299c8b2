// Wall-clock timing and the figures the pulumi-preview benches print (median, min, max).
import { performance } from 'node:perf_hooks';

export function time(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return (performance.now() - t0) / 1000;
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export const fmt = (xs: number[]) =>
  `median ${median(xs).toFixed(2)} s  (min ${Math.min(...xs).toFixed(2)}, max ${Math.max(...xs).toFixed(2)}, n=${xs.length})`;

/** `--runs N` of the command line, else `fallback`. */
export function runsArgument(fallback = 5): number {
  const i = process.argv.indexOf('--runs');
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
