import { describe, expect, it } from 'vitest';
import { printable } from './printable.ts';

// Nothing a terminal acts on: any control character but newline and tab.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe('printable', () => {
  it('shows a planted title change and screen clear as text', () => {
    const planted = 'step 5\x1b]0;title\x07\x1b[2Jafter';
    const shown = printable(planted);
    expect(shown).toBe('step 5\\x1b]0;title\\x07\\x1b[2Jafter');
    expect(shown).not.toMatch(CONTROL);
  });

  it('keeps newlines, tabs and UTF-8 text; shows CR, BS, DEL, NUL and C1 controls', () => {
    expect(printable('a\tb\nc — é ✓\n')).toBe('a\tb\nc — é ✓\n');
    expect(printable('10%\r99%\x08\x7f\x00\u009b31m\u009d52;c;x\u009c')).toBe(
      '10%\\r99%\\x08\\x7f\\x00\\u009b31m\\u009d52;c;x\\u009c',
    );
    for (let code = 0; code < 0xa0; code++) {
      const c = String.fromCharCode(code);
      if (c === '\n' || c === '\t') expect(printable(c)).toBe(c);
      else expect(printable(c), `U+${code.toString(16)}`).not.toMatch(CONTROL);
    }
  });

  it('leaves text without control characters as it is', () => {
    const text = 'epoch 3 val_loss=0.12 \\x1b is already text';
    expect(printable(text)).toBe(text);
  });
});
