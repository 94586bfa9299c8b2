// The account balance from the site's own command (OSC: OSCusage), as the profile describes it.
import type { BalanceCommand } from '@kdgat/config';

/** The command line to run: `{account}` replaced (without a shell, so no quoting is involved). */
export function balanceArgv(cmd: BalanceCommand, account: string | undefined): string[] {
  return cmd.argv.map((a) => a.replaceAll('{account}', account ?? ''));
}

/** The amount the profile's pattern finds in the command's output, or null. */
export function parseBalance(stdout: string, cmd: BalanceCommand): number | null {
  const m = new RegExp(cmd.pattern).exec(stdout);
  if (!m || m[1] === undefined) return null;
  const n = Number(m[1].replaceAll(',', ''));
  return Number.isFinite(n) ? n : null;
}
