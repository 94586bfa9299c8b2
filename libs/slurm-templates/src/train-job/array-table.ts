/**
 * The sweep table an array job reads: one line per override, `index<TAB>key<TAB>value`, values with
 * backslash escapes `\\`, `\t`, `\n`, `\r` so any text fits on one line. The job decodes a value with
 * `printf -v v '%b'`: after this encoding every backslash starts one of those four pairs, so `%b` can
 * meet no other escape (`\c`, `\x…`, `\0…`) and the text comes back exactly. Nothing is evaluated.
 */
import type { Scalar } from '../inputs.ts';
import { TemplateInputError } from '../quote/errors.ts';
import { RULES, requireMatch } from '../quote/validate.ts';

export function encodeTableValue(value: string): string {
  if (value.includes('\0')) throw new TemplateInputError('sweep value', value, 'text without NUL characters');
  return value.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r');
}

export function encodeArrayTable(points: Record<string, Scalar>[]): string {
  const lines: string[] = [];
  points.forEach((point, index) => {
    for (const [key, value] of Object.entries(point)) {
      requireMatch(`sweepPoints[${index}] key`, key, RULES.overrideKey);
      lines.push(`${index}\t${key}\t${encodeTableValue(scalarText(`sweepPoints[${index}].${key}`, value))}`);
    }
  });
  return lines.map((l) => `${l}\n`).join('');
}

/** Override values as the text passed after `-O key`. */
export function scalarText(field: string, value: Scalar): string {
  if (value === null) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TemplateInputError(field, value, 'a finite number');
    return String(value);
  }
  if (typeof value === 'string') return value;
  throw new TemplateInputError(field, value, 'a string, number, boolean or null');
}
