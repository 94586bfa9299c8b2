/**
 * Upstream-style checks for values that cannot be quoted where they land: `#SBATCH` lines are parsed
 * by sbatch, not bash, and a newline there would start a new script line. These values must match a
 * safe pattern or rendering fails naming the field.
 */
import { TemplateInputError } from './errors.ts';

/** Job names, accounts, partitions, GPU types, dataset/model/scale/stage names. */
export const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** Absolute paths that sbatch directives can carry (no whitespace, no `%` patterns of our own). */
export const SAFE_DIRECTIVE_PATH = /^\/[A-Za-z0-9._/+@,=-]*$/;
/** Dotted override keys of the Python pipeline (`training.lr`). */
export const OVERRIDE_KEY = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$/;
/** SLURM walltime: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS. */
export const SLURM_TIME = /^(\d+-)?\d+(:\d{1,2}){0,2}$/;
/** Job ids accepted in `--dependency` (`123`, `123_4`). */
export const JOB_ID = /^\d+(_\d+)?$/;
/** Module names (`cuda/12.4.1`, `miniconda3/24.1.2-py310`). */
export const MODULE_NAME = /^[A-Za-z0-9][A-Za-z0-9._/+-]*$/;

export function requireMatch(field: string, value: string, pattern: RegExp, expected: string): string {
  if (typeof value !== 'string' || !pattern.test(value)) throw new TemplateInputError(field, value, expected);
  return value;
}

export function requireName(field: string, value: string): string {
  return requireMatch(field, value, SAFE_NAME, `a name matching ${SAFE_NAME}`);
}

export function requirePositiveInt(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new TemplateInputError(field, value, 'a positive integer');
  return value;
}

export function requireAbsolutePath(field: string, value: string): string {
  if (typeof value !== 'string' || !value.startsWith('/') || value.includes('\0')) {
    throw new TemplateInputError(field, value, 'an absolute path');
  }
  return value;
}

/** Joins path segments with single slashes (pure string work: no disk access). */
export function joinPath(...parts: string[]): string {
  return parts
    .map((p, i) => (i === 0 ? p.replace(/\/+$/, '') : p.replace(/^\/+|\/+$/g, '')))
    .filter((p, i) => i === 0 || p.length > 0)
    .join('/');
}
