// What a job wrote, made safe to print on the user's terminal. A job's log is written by whatever
// runs in the job (the pipeline, its libraries, anything a sweep point or a shared tree imports):
// an escape sequence in it, printed as is, retitles the terminal (`ESC ]0;…BEL`), clears it
// (`ESC [2J`), moves the cursor to overwrite what was shown (CR, `ESC [A`), or, on some terminals,
// writes to the clipboard (OSC 52) or answers a query into the terminal's input.

/**
 * `text` with every control character but newline and tab shown as a visible escape: C0 controls
 * (ESC, CR, BEL, BS, …) as `\x1b`, `\r`, `\x07`, DEL as `\x7f`, C1 controls (U+0080–U+009F, which
 * some terminals take as CSI/OSC on their own) as `\u009b`. A backslash is left as it is: what is
 * shown is for reading, not for parsing back. Everything else, UTF-8 text included, is unchanged.
 */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => {
    const code = c.charCodeAt(0);
    if (c === '\r') return '\\r';
    const hex = code.toString(16);
    return code < 0x80 ? `\\x${hex.padStart(2, '0')}` : `\\u${hex.padStart(4, '0')}`;
  });
}
