// SLURM time strings and memory sizes, the two units specs are written in.
import { SCRIPT_VALUES } from './script-values.ts';

const TIME_FORMS =
  'a SLURM time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. "8:00:00", "7-00:00:00")';

/** Seconds in a SLURM time string (sbatch --time forms). Throws with the accepted forms. */
export function parseSlurmTime(s: string): number {
  const m = SCRIPT_VALUES.slurmTime.pattern.exec(s.trim());
  if (!m) throw new Error(`"${s}" is not ${TIME_FORMS}`);
  const [, d, a, b, c] = m;
  const n = (x: string | undefined) => (x === undefined ? 0 : Number(x));
  let seconds: number;
  if (d !== undefined) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    seconds = n(d) * 86400 + n(a) * 3600 + n(b) * 60 + n(c);
  } else if (c !== undefined) {
    seconds = n(a) * 3600 + n(b) * 60 + n(c);
  } else if (b !== undefined) {
    seconds = n(a) * 60 + n(b); // MM:SS
  } else {
    seconds = n(a) * 60; // minutes
  }
  return seconds;
}

export function isSlurmTime(s: string): boolean {
  try {
    parseSlurmTime(s);
    return true;
  } catch {
    return false;
  }
}

/** The canonical `D-HH:MM:SS` / `HH:MM:SS` form of a number of seconds. */
export function formatSlurmTime(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const days = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = s % 60;
  const p = (x: number) => String(x).padStart(2, '0');
  return `${days > 0 ? `${days}-` : ''}${p(hh)}:${p(mm)}:${p(ss)}`;
}

/** GB in a memory size: a number of GB, or "85G", "512M", "1T", "85GB". */
export function parseMemGB(v: string | number): number {
  if (typeof v === 'number') {
    if (!(v > 0)) throw new Error(`memory ${v} must be a positive number of GB`);
    return v;
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$/i.exec(v);
  if (!m) throw new Error(`"${v}" is not a memory size such as 85G, 512M or 1T`);
  const factor = { K: 1 / 1024 ** 2, M: 1 / 1024, G: 1, T: 1024, '': 1 }[m[2]!.toUpperCase() as 'K'];
  return Number(m[1]) * factor;
}
