// The command line run in this process, its output captured: for the unit tests of the CLI and the
// commands (`main` with its own streams; no child process, no terminal).
import { Writable } from 'node:stream';
import { main } from './main.ts';

function capture() {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, cb) {
      text += String(chunk);
      cb();
    },
  });
  return { stream, text: () => text };
}

/** `kdgat-runner ARGV` in this process: its exit status, stdout and stderr. */
export async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out = capture();
  const err = capture();
  const code = await main(argv, { out: out.stream, err: err.stream });
  return { code, out: out.text(), err: err.text() };
}
