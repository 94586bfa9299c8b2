// The Python that runs the site helpers (`python -m <helpers>`) over a run's files here, for a stack: what the tune
// report (tune/study.ts) and the run report (@kdgat/run-record) both start.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultEnvironment, stackEnvironment } from '@kdgat/config';
import type { StackOutputs } from './outputs.ts';

/** This checkout's Python environment (`npm run bootstrap`: python/.venv, from python/uv.lock). */
const CHECKOUT_PYTHON = fileURLToPath(new URL('../../../../python/.venv/bin/python', import.meta.url));

/**
 * The python that reads a run's files here: `$HPC_PYTHON`, else the environment's
 * (`<prefix>/bin/python`) when the site is this machine, else this checkout's own (a site over SSH:
 * its environment is over there, the local copy of the run is here).
 */
export function pythonOf(stack: StackOutputs, environment?: string): string {
  if (process.env['HPC_PYTHON']) return process.env['HPC_PYTHON'];
  if (stack.connection?.kind === 'ssh') return CHECKOUT_PYTHON;
  const env =
    (environment !== undefined ? stackEnvironment(stack, environment) : undefined) ??
    defaultEnvironment(stack);
  return join(env.prefix, 'bin', 'python');
}
