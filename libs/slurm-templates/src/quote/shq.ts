/**
 * The one quoting helper: every value that reaches a rendered script goes through `shq`.
 *
 * Three forms, chosen by content, all of which bash reads back as exactly the input:
 * - plain words (`[A-Za-z0-9_./:=@%+,-]`) stay bare, so goldens read like hand-written scripts;
 * - text without `'`, `$`, backticks, backslashes or control characters goes in single quotes;
 * - anything else goes in ANSI-C quotes `$'…'` with `\\`, `\'` and `\xHH` escapes. Single quotes would be
 *   just as safe, but shellcheck flags `$`/backticks inside them (SC2016) and a newline would split the line.
 */
import { TemplateInputError } from './errors.ts';

const PLAIN_WORD = /^[A-Za-z0-9_./:=@%+,-]+$/;
// eslint-disable-next-line no-control-regex
const NEEDS_ANSI_C = /['$`\\\x00-\x1f\x7f]/;

export function shq(value: string | number): string {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TemplateInputError('value', value, 'a finite number');
    return String(value);
  }
  if (value.includes('\0')) throw new TemplateInputError('value', value, 'text without NUL characters');
  if (PLAIN_WORD.test(value)) return value;
  if (!NEEDS_ANSI_C.test(value)) return `'${value}'`;
  let out = "$'";
  for (const ch of value) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === '\\') out += '\\\\';
    else if (ch === "'") out += "\\'";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}'`;
}
