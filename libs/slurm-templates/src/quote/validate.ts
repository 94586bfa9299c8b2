/**
 * Upstream-style checks for values that cannot be quoted where they land: `#SBATCH` lines are parsed
 * by sbatch, not bash, and a newline there would start a new script line. These values must match
 * their rule (`SCRIPT_VALUES` of @kdgat/config) or rendering fails naming the field.
 */
import { SCRIPT_VALUES, matchesRule, type ValueRule } from '@kdgat/config';
import { TemplateInputError } from './errors.ts';

/** The rules are declared once, in @kdgat/config, and validation uses the same ones. */
export const RULES = SCRIPT_VALUES;

export function requireMatch(field: string, value: string, rule: ValueRule): string {
  if (!matchesRule(rule, value)) throw new TemplateInputError(field, value, rule.expected);
  return value;
}

export function requireName(field: string, value: string): string {
  return requireMatch(field, value, RULES.name);
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
