/**
 * The guaranteed rates of one class of a group tree (HTB's `rate`): its own,
 * its children's together, and the rule that they fit the rates above.
 *
 * A class is guaranteed at least what its children are together (its
 * effective guarantee, {@link ClassGuarantees.effective}), so a member's
 * guarantee holds however deep it sits. The rule: at every class, the
 * children's effective guarantees add up to at most the class's rate (its own,
 * or the nearest one above it); every change is checked all the way up before
 * anything is changed, and refused with the numbers in the message.
 */

import { InvalidOptionError } from '../errors.js';
import { describeRate } from '../units.js';

/** Tolerance for sums of guaranteed rates (fractions of a byte per second). */
const SLACK = 1e-9;

/** The refusal: guarantees that would add up to more than the rate they share. */
export function guaranteeError(
  option: string,
  value: unknown,
  sumPerSecond: number,
  ratePerSecond: number,
): InvalidOptionError {
  return new InvalidOptionError(
    option,
    value,
    `guaranteed rates would add up to ${describeRate(sumPerSecond)} in a group whose rate is ${describeRate(ratePerSecond)}: ` +
      'a class with demand always gets its guaranteed rate, so the guarantees of the members and subgroups ' +
      "sharing a rate cannot add up to more than it; lower a guaranteed rate, or raise the group's rate",
  );
}

/** Throws {@link guaranteeError} if `sumPerSecond` is above `ratePerSecond`. */
export function checkSum(sumPerSecond: number, ratePerSecond: number, option: string, value: unknown): void {
  if (sumPerSecond > ratePerSecond * (1 + SLACK)) throw guaranteeError(option, value, sumPerSecond, ratePerSecond);
}

/** One class's guarantees; see the file's opening comment. */
export class ClassGuarantees {
  /** Its own guaranteed rate, bytes per second (0: none). */
  own = 0;
  /** Its children's effective guarantees together, bytes per second. */
  children = 0;
  readonly #above: ClassGuarantees | undefined;
  readonly #ceilingPerSecond: () => number;
  readonly #changed: (change: number) => void;

  /**
   * `above`: its parent's (undefined for the root); `ceilingPerSecond`: the
   * rate that bounds the class; `changed`: its effective guarantee changed by
   * this much (the parent's ring and the port are told; the sums above are
   * this object's business).
   */
  constructor(above: ClassGuarantees | undefined, ceilingPerSecond: () => number, changed: (change: number) => void) {
    this.#above = above;
    this.#ceilingPerSecond = ceilingPerSecond;
    this.#changed = changed;
  }

  /** What its parent counts: its own, and at least its children's together. */
  get effective(): number {
    return Math.max(this.own, this.children);
  }

  /** Throws if the children's guarantees here, grown by `delta`, would pass a rate on the way up. */
  check(delta: number, option: string, value: unknown): void {
    let level: ClassGuarantees | undefined = this;
    let grow = delta;
    while (level !== undefined && grow > 0) {
      const sum = level.children + grow;
      checkSum(sum, level.#ceilingPerSecond(), option, value);
      grow = Math.max(level.own, sum) - level.effective;
      level = level.#above;
    }
  }

  /** Adds `delta` to the children's guarantees here, and passes a change of this class's effective guarantee up. */
  add(delta: number): void {
    if (delta === 0) return;
    const before = this.effective;
    this.children = Math.max(0, this.children + delta);
    const change = this.effective - before;
    if (change === 0 || this.#above === undefined) return;
    this.#changed(change);
    this.#above.add(change);
  }
}
