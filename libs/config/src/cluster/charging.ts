// What a site charges for a job, and where an account's balance can be read: profile fields, never
// constants, because rates change by fiscal year and client category (docs: DOMAIN.md, Charging).
import { z } from 'zod';
import { SCRIPT_VALUES, ruleString, type ValueRule } from '../script-values.ts';

const BillingUnit = ruleString(SCRIPT_VALUES.billingUnit);

/**
 * A word of the balance command's argv. Run without a shell, so no quoting is involved; unlike a
 * script value it may start with `-` (an option such as `-P`). `{account}` stands for the account.
 */
const BALANCE_ARG: ValueRule = {
  pattern: /^[A-Za-z0-9_{}./=:@+-]+$/,
  expected: 'a word of letters, digits and _ { } . / = : @ + -',
};

/** Billing units per core-hour (effective cores) and per GPU-hour on one partition. */
export const ChargeRatesSchema = z
  .object({
    coreHour: z.number().min(0),
    gpuHour: z.number().min(0),
  })
  .strict();
export type ChargeRates = z.infer<typeof ChargeRatesSchema>;

/**
 * The site's charging rules. Effective cores per node are max(cores requested, memory requested /
 * memory per core) (the partition's `memPerCoreGB`, else its memory per node / cores per node); a
 * multi-node job is charged for whole nodes when `wholeNodesWhenMultiNode` is set (OSC).
 */
export const ChargingSchema = z
  .object({
    /** The unit a budget is written in, e.g. `USD` or `SU`. */
    unit: BillingUnit,
    /** Where the rules and rates come from (a URL and a date), shown with every estimate. */
    source: z.string().min(1),
    wholeNodesWhenMultiNode: z.boolean().default(true),
    /** Rates by partition name; a partition without rates is estimated in hours only. */
    partitions: z.record(z.string(), ChargeRatesSchema),
  })
  .strict();
export type Charging = z.infer<typeof ChargingSchema>;

/**
 * A site command that prints the account's balance (OSC: `OSCusage`). `argv` is run without a shell;
 * `{account}` in an argument is replaced by the experiment's account. The first capture group of
 * `pattern` (a regular expression, searched in stdout) is the amount, in `unit`.
 */
export const BalanceCommandSchema = z
  .object({
    argv: z.array(ruleString(BALANCE_ARG)).min(1),
    pattern: z.string().refine(
      (p) => {
        try {
          return new RegExp(`${p}|`).exec('')!.length >= 2;
        } catch {
          return false;
        }
      },
      { message: 'a regular expression with one capture group (the amount)' },
    ),
    unit: BillingUnit,
  })
  .strict();
export type BalanceCommand = z.infer<typeof BalanceCommandSchema>;
