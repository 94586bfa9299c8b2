// A conditional skip says why in the run's output: the default reporter may leave a skipped test's
// title out, but it prints what a test file writes to the console while it is collected.

/** `condition`, after printing why `what` does not run here when it is false (for `runIf`). */
export function runsHere(condition: boolean, what: string, why: string): boolean {
  if (!condition) console.warn(`skipped: ${what}: ${why}`);
  return condition;
}

/** Why the tests that need a SLURM controller did not run. */
export const NO_SLURM_HERE =
  'no SLURM controller answers `scontrol ping` here (scripts/slurm-local.sh up starts one)';
