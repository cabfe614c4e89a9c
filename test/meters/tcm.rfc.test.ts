/**
 * srTCM and trTCM against RFC 2697 and RFC 2698 transcribed literally: whole
 * tokens, added one at a time at discrete updates, the k-th update of a rate
 * of R tokens a second at exactly k / R seconds after time 0 (the marker's
 * creation). The reference below counts time in whole nanoseconds and rates
 * as exact fractions (BigInt), so it has no rounding at all.
 *
 * RFC 2697, section 3: "the token counts Tc and Te are updated CIR times per
 * second as follows: If Tc is less than CBS, Tc is incremented by one, else
 * if Te is less then EBS, Te is incremented by one, else neither Tc nor Te is
 * incremented." RFC 2698, section 3: "the token count Tp is incremented by
 * one PIR times per second up to PBS and the token count Tc is incremented by
 * one CIR times per second up to CBS."
 *
 * Three parts: sequences worked by hand from the text (each also run on the
 * reference, to check the reference); random sequences at fractional times,
 * with long idle periods and performance.now()-style origins; and runs of a
 * million packets, where the totals must come out exactly (no drift).
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Color, type ColorMode, srTCM, trTCM } from '../../src/index.js';
import { manualClock } from '../helpers/fake-clock.js';

/** A rate of p / q tokens a second, exactly. */
interface ExactRate {
  p: bigint;
  q: bigint;
}

/** The number of updates of `rate` due by `ns` nanoseconds after time 0: update k is at k * q * 1e9 / p ns. */
function updatesDue(rate: ExactRate, ns: bigint): bigint {
  return ns <= 0n ? 0n : (ns * rate.p) / (rate.q * 1_000_000_000n);
}

/** RFC 2697, section 3. */
class RfcSrTcm {
  tc: number;
  te: number;
  #done = 0n;
  constructor(
    readonly cir: ExactRate,
    readonly cbs: number,
    readonly ebs: number,
  ) {
    this.tc = cbs;
    this.te = ebs;
  }

  /** One of the CIR updates a second. */
  update(): void {
    if (this.tc < this.cbs) this.tc++;
    else if (this.te < this.ebs) this.te++;
  }

  /**
   * Applies, one by one, the updates due by `ns` after time 0. An update on
   * full buckets changes nothing (the RFC's "else neither"), so the loop
   * stops there and counts the rest as done.
   */
  at(ns: bigint): this {
    const due = updatesDue(this.cir, ns);
    while (this.#done < due) {
      if (this.tc >= this.cbs && this.te >= this.ebs) {
        this.#done = due;
        break;
      }
      this.update();
      this.#done++;
    }
    return this;
  }

  /** Colour-blind when `pre` is undefined (the blind rules are the aware ones with every packet green). */
  mark(ns: bigint, b: number, pre?: Color): Color {
    this.at(ns);
    const colour = pre ?? 'green';
    if (colour === 'green' && this.tc - b >= 0) {
      this.tc -= b;
      return 'green';
    }
    if ((colour === 'green' || colour === 'yellow') && this.te - b >= 0) {
      this.te -= b;
      return 'yellow';
    }
    return 'red';
  }

  get tokens(): { tc: number; te: number } {
    return { tc: this.tc, te: this.te };
  }
}

/** RFC 2698, section 3. */
class RfcTrTcm {
  tp: number;
  tc: number;
  #doneP = 0n;
  #doneC = 0n;
  constructor(
    readonly pir: ExactRate,
    readonly pbs: number,
    readonly cir: ExactRate,
    readonly cbs: number,
  ) {
    this.tp = pbs;
    this.tc = cbs;
  }

  at(ns: bigint): this {
    const dueP = updatesDue(this.pir, ns);
    while (this.#doneP < dueP) {
      if (this.tp >= this.pbs) {
        this.#doneP = dueP;
        break;
      }
      this.tp++;
      this.#doneP++;
    }
    const dueC = updatesDue(this.cir, ns);
    while (this.#doneC < dueC) {
      if (this.tc >= this.cbs) {
        this.#doneC = dueC;
        break;
      }
      this.tc++;
      this.#doneC++;
    }
    return this;
  }

  /** Colour-blind when `pre` is undefined. */
  mark(ns: bigint, b: number, pre?: Color): Color {
    this.at(ns);
    if (pre === 'red' || this.tp - b < 0) return 'red';
    if (pre === 'yellow' || this.tc - b < 0) {
      this.tp -= b;
      return 'yellow';
    }
    this.tp -= b;
    this.tc -= b;
    return 'green';
  }

  get tokens(): { tp: number; tc: number } {
    return { tp: this.tp, tc: this.tc };
  }
}

/** Milliseconds (a decimal with up to 6 places) to whole nanoseconds, exactly. */
function nsOf(ms: number): bigint {
  return BigInt(Math.round(ms * 1e6));
}

/** Nanoseconds to the clock's milliseconds. */
function msOf(ns: bigint): number {
  return Number(ns) / 1e6;
}

/** A rate as the marker is given it, and the fraction it stands for. */
interface RateCase {
  input: number | string;
  exact: ExactRate;
}

function rate(input: number | string, p: bigint, q = 1n): RateCase {
  return { input, exact: { p, q } };
}

// ---------------------------------------------------------------------------
// Sequences worked by hand from the RFCs' text.

/** A packet at `at` ms of `size`, expected `expect`; or the token counts expected at `at`. */
type Step = { at: number; size: number; pre?: Color; expect: Color } | { at: number; tokens: Record<string, number> };

interface SrCase {
  name: string;
  cir: RateCase;
  cbs: number;
  ebs: number;
  mode?: ColorMode;
  originMs?: number;
  steps: Step[];
}

interface TrCase {
  name: string;
  pir: RateCase;
  pbs: number;
  cir: RateCase;
  cbs: number;
  mode?: ColorMode;
  originMs?: number;
  steps: Step[];
}

const srCases: SrCase[] = [
  {
    name: 'integer times: green while C lasts, yellow from E, then red; the refill goes to C first',
    cir: rate(1000, 1000n),
    cbs: 1500,
    ebs: 3000,
    steps: [
      { at: 0, size: 1000, expect: 'green' },
      { at: 0, size: 1000, expect: 'yellow' },
      { at: 0, size: 1000, expect: 'yellow' },
      { at: 0, size: 1000, expect: 'yellow' },
      { at: 0, size: 1000, expect: 'red' },
      { at: 0, tokens: { tc: 500, te: 0 } },
      { at: 1000, tokens: { tc: 1500, te: 0 } },
      { at: 1000, size: 1000, expect: 'green' },
      { at: 1000, size: 1000, expect: 'red' },
    ],
  },
  {
    name: 'E fills only with what overflows C',
    cir: rate(1000, 1000n),
    cbs: 1500,
    ebs: 3000,
    steps: [
      { at: 0, size: 1500, expect: 'green' },
      { at: 0, size: 3000, expect: 'yellow' },
      { at: 1000, tokens: { tc: 1000, te: 0 } },
      { at: 2000, tokens: { tc: 1500, te: 500 } },
      { at: 100_000, tokens: { tc: 1500, te: 3000 } },
    ],
  },
  {
    name: 'issue 22: CIR 1250, CBS 10, EBS 20, marks at 0, 1 and 2.5 ms: Tc 2 and Te 1 at 2.5 ms, so 2 bytes are green',
    cir: rate(1250, 1250n),
    cbs: 10,
    ebs: 20,
    steps: [
      { at: 0, size: 20, expect: 'yellow' }, // Tc 10, Te 0
      { at: 1, tokens: { tc: 10, te: 1 } }, // the update at 0.8 ms finds C full: Te 1
      { at: 1, size: 10, expect: 'green' }, // Tc 0
      { at: 2.5, tokens: { tc: 2, te: 1 } }, // updates at 1.6 and 2.4 ms
      { at: 2.5, size: 2, expect: 'green' },
      { at: 2.5, tokens: { tc: 0, te: 1 } },
    ],
  },
  {
    name: 'an update due exactly at the packet’s time counts; a nanosecond before, it does not',
    cir: rate(1250, 1250n),
    cbs: 10,
    ebs: 0,
    steps: [
      { at: 0, size: 10, expect: 'green' },
      { at: 0.799999, size: 1, expect: 'red' },
      { at: 0.8, tokens: { tc: 1, te: 0 } },
      { at: 0.8, size: 1, expect: 'green' },
    ],
  },
  {
    name: 'the same a day into a performance.now() clock',
    cir: rate(1250, 1250n),
    cbs: 10,
    ebs: 0,
    originMs: 86_400_000.123456,
    steps: [
      { at: 86_400_000.123456, size: 10, expect: 'green' },
      { at: 86_400_000.923455, size: 1, expect: 'red' },
      { at: 86_400_000.923456, size: 1, expect: 'green' },
    ],
  },
  {
    name: 'updates keep their schedule while the buckets are full: drained at 3.5 ms, one token at 4 ms',
    cir: rate(1000, 1000n),
    cbs: 5,
    ebs: 0,
    steps: [
      { at: 3.5, size: 5, expect: 'green' },
      { at: 4, tokens: { tc: 1, te: 0 } },
      { at: 4, size: 1, expect: 'green' },
      { at: 4.999999, size: 1, expect: 'red' },
    ],
  },
  {
    name: 'tokens overflow from C to E one at a time',
    cir: rate(1000, 1000n),
    cbs: 3,
    ebs: 5,
    steps: [
      { at: 0, size: 1, expect: 'green' },
      { at: 0, size: 5, expect: 'yellow' },
      { at: 2.5, tokens: { tc: 3, te: 1 } }, // the update at 1 ms fills C, the one at 2 ms goes to E
      { at: 2.5, size: 3, expect: 'green' },
      { at: 2.5, size: 1, expect: 'yellow' },
      { at: 2.5, size: 1, expect: 'red' },
    ],
  },
  {
    name: 'colour-aware at fractional times: only a green packet uses C, a yellow one only E',
    cir: rate(1250, 1250n),
    cbs: 10,
    ebs: 20,
    mode: 'color-aware',
    steps: [
      { at: 0, size: 20, pre: 'green', expect: 'yellow' }, // C cannot hold it: E
      { at: 0.5, size: 10, pre: 'green', expect: 'green' },
      { at: 1.75, tokens: { tc: 2, te: 0 } }, // updates at 0.8 and 1.6 ms
      { at: 1.75, size: 2, pre: 'yellow', expect: 'red' },
      { at: 1.75, size: 2, pre: 'green', expect: 'green' },
    ],
  },
  {
    name: 'colour-aware: pre-red stays red and takes nothing; pre-yellow never uses C',
    cir: rate(1000, 1000n),
    cbs: 1000,
    ebs: 1000,
    mode: 'color-aware',
    steps: [
      { at: 0, size: 100, pre: 'red', expect: 'red' },
      { at: 0, tokens: { tc: 1000, te: 1000 } },
      { at: 0, size: 300, pre: 'yellow', expect: 'yellow' },
      { at: 0, size: 800, pre: 'green', expect: 'green' },
      { at: 0, size: 800, pre: 'green', expect: 'red' },
      { at: 0, size: 700, pre: 'green', expect: 'yellow' },
      { at: 0, size: 100, pre: 'yellow', expect: 'red' },
      { at: 0, size: 100, pre: 'green', expect: 'green' },
    ],
  },
  {
    name: 'after ten idle days the updates are still on the schedule that began at time 0',
    cir: rate(1250, 1250n),
    cbs: 10,
    ebs: 0,
    steps: [
      { at: 864_000_000.3, size: 10, expect: 'green' }, // the last update was at 864 000 000.0 ms
      { at: 864_000_000.8, size: 1, expect: 'green' },
      { at: 864_000_001.5, size: 1, expect: 'red' },
      { at: 864_000_001.6, size: 1, expect: 'green' },
    ],
  },
  {
    name: "a rate per minute: '100/min' updates every 600 ms exactly",
    cir: rate('100/min', 5n, 3n),
    cbs: 1,
    ebs: 1,
    steps: [
      { at: 0, size: 1, expect: 'green' },
      { at: 0, size: 1, expect: 'yellow' },
      { at: 599.999999, size: 1, expect: 'red' },
      { at: 600, size: 1, expect: 'green' },
      { at: 1199.999999, size: 1, expect: 'red' },
      { at: 1200, size: 1, expect: 'green' },
      { at: 1800, size: 1, expect: 'green' },
    ],
  },
  {
    name: 'a rate below one a second: 0.5/s updates every 2 s',
    cir: rate(0.5, 1n, 2n),
    cbs: 2,
    ebs: 0,
    steps: [
      { at: 0, size: 2, expect: 'green' },
      { at: 1999.999, size: 1, expect: 'red' },
      { at: 2000, tokens: { tc: 1, te: 0 } },
      { at: 3000, size: 1, expect: 'green' },
      { at: 3999, size: 1, expect: 'red' },
      { at: 4000, size: 1, expect: 'green' },
    ],
  },
  {
    name: 'time that goes backwards counts as no time at all',
    cir: rate(1000, 1000n),
    cbs: 2,
    ebs: 0,
    steps: [
      { at: 5, size: 2, expect: 'green' },
      { at: 2, tokens: { tc: 0, te: 0 } },
      { at: 2, size: 1, expect: 'red' },
      { at: 5.5, size: 1, expect: 'red' },
      { at: 6, size: 1, expect: 'green' },
    ],
  },
];

const trCases: TrCase[] = [
  {
    name: 'integer times: red above the peak, yellow above the committed rate, green within both',
    pir: rate(2000, 2000n),
    pbs: 2000,
    cir: rate(1000, 1000n),
    cbs: 1000,
    steps: [
      { at: 0, size: 600, expect: 'green' },
      { at: 0, size: 600, expect: 'yellow' },
      { at: 0, tokens: { tp: 800, tc: 400 } },
      { at: 0, size: 900, expect: 'red' },
      { at: 0, size: 400, expect: 'green' },
      { at: 250, tokens: { tp: 900, tc: 250 } },
      { at: 250, size: 300, expect: 'yellow' },
      { at: 250, size: 250, expect: 'green' },
      { at: 250, tokens: { tp: 350, tc: 0 } },
    ],
  },
  {
    name: 'colour-aware: never greener than the pre-colour; pre-red takes nothing; pre-yellow only from P',
    pir: rate(2000, 2000n),
    pbs: 2000,
    cir: rate(1000, 1000n),
    cbs: 1000,
    mode: 'color-aware',
    steps: [
      { at: 0, size: 100, pre: 'red', expect: 'red' },
      { at: 0, tokens: { tp: 2000, tc: 1000 } },
      { at: 0, size: 500, pre: 'yellow', expect: 'yellow' },
      { at: 0, tokens: { tp: 1500, tc: 1000 } },
      { at: 0, size: 900, pre: 'green', expect: 'green' },
      { at: 0, size: 200, pre: 'green', expect: 'yellow' },
      { at: 0, size: 500, pre: 'yellow', expect: 'red' },
      { at: 0, tokens: { tp: 400, tc: 100 } },
    ],
  },
  {
    name: 'issue 22: PIR = CIR = 1250, buckets of 10, drained at 0.5 ms: 2 and 2 at 1.75 ms, so 2 bytes are green',
    pir: rate(1250, 1250n),
    pbs: 10,
    cir: rate(1250, 1250n),
    cbs: 10,
    steps: [
      { at: 0.5, size: 10, expect: 'green' },
      { at: 1.75, tokens: { tp: 2, tc: 2 } }, // updates at 0.8 and 1.6 ms
      { at: 1.75, size: 2, expect: 'green' },
    ],
  },
  {
    name: 'P and C keep independent schedules: PIR 3000 updates at 1/3 ms steps, CIR 1000 at 1 ms',
    pir: rate(3000, 3000n),
    pbs: 5,
    cir: rate(1000, 1000n),
    cbs: 5,
    steps: [
      { at: 0, size: 5, expect: 'green' },
      { at: 0.5, tokens: { tp: 1, tc: 0 } },
      { at: 0.5, size: 1, expect: 'yellow' },
      { at: 1, tokens: { tp: 2, tc: 1 } },
      { at: 1, size: 1, expect: 'green' },
      { at: 1, size: 1, expect: 'yellow' },
      { at: 1, size: 1, expect: 'red' },
    ],
  },
  {
    name: 'colour-aware at fractional times',
    pir: rate(2500, 2500n),
    pbs: 10,
    cir: rate(1250, 1250n),
    cbs: 10,
    mode: 'color-aware',
    steps: [
      { at: 0.5, size: 10, pre: 'green', expect: 'green' },
      { at: 1.7, tokens: { tp: 3, tc: 2 } }, // P at 0.8, 1.2, 1.6 ms; C at 0.8, 1.6 ms
      { at: 1.7, size: 2, pre: 'green', expect: 'green' },
      { at: 1.7, size: 1, pre: 'yellow', expect: 'yellow' },
      { at: 1.7, size: 1, pre: 'red', expect: 'red' },
    ],
  },
  {
    name: 'three idle days into a performance.now() clock, both schedules intact',
    pir: rate(1250, 1250n),
    pbs: 4,
    cir: rate(1000, 1000n),
    cbs: 4,
    originMs: 123_456.789,
    steps: [
      { at: 259_323_456.7891, size: 4, expect: 'green' }, // 3 days and 100 ns after the origin
      { at: 259_323_457.589, tokens: { tp: 1, tc: 0 } }, // P's next update, 0.8 ms after 3 days
      { at: 259_323_457.589, size: 1, expect: 'yellow' },
      { at: 259_323_457.789, tokens: { tp: 0, tc: 1 } }, // C's, 1 ms after
      { at: 259_323_457.789, size: 1, expect: 'red' },
      { at: 259_323_458.389, size: 1, expect: 'green' },
    ],
  },
  {
    name: "rates per minute: '120/min' and '100/min' update every 500 and 600 ms",
    pir: rate('120/min', 2n),
    pbs: 1,
    cir: rate('100/min', 5n, 3n),
    cbs: 1,
    steps: [
      { at: 0, size: 1, expect: 'green' },
      { at: 500, tokens: { tp: 1, tc: 0 } },
      { at: 500, size: 1, expect: 'yellow' },
      { at: 600, tokens: { tp: 0, tc: 1 } },
      { at: 600, size: 1, expect: 'red' },
      { at: 1000, tokens: { tp: 1, tc: 1 } },
      { at: 1000, size: 1, expect: 'green' },
    ],
  },
];

/** Runs `steps` on a marker and on a reference; both must give the hand-worked answers. */
function runSteps(
  steps: Step[],
  originMs: number,
  marker: { markAt(ms: number, size: number, pre?: Color): Color; tokensAt(ms: number): object },
  reference: { mark(ns: bigint, size: number, pre?: Color): Color; at(ns: bigint): { tokens: object } },
): void {
  const origin = nsOf(originMs);
  for (const [i, step] of steps.entries()) {
    const ns = nsOf(step.at) - origin;
    if ('tokens' in step) {
      expect(reference.at(ns).tokens, `reference, step ${i}`).toEqual(step.tokens);
      expect(marker.tokensAt(step.at), `step ${i}`).toEqual(step.tokens);
    } else {
      expect(reference.mark(ns, step.size, step.pre), `reference, step ${i}`).toBe(step.expect);
      expect(marker.markAt(step.at, step.size, step.pre), `step ${i}`).toBe(step.expect);
    }
  }
}

describe('RFC 2697 (srTCM), sequences worked by hand', () => {
  it.each(srCases)('$name', (c) => {
    const originMs = c.originMs ?? 0;
    const m = new srTCM({ cir: c.cir.input, cbs: c.cbs, ebs: c.ebs, mode: c.mode, clock: manualClock(originMs) });
    runSteps(c.steps, originMs, m, new RfcSrTcm(c.cir.exact, c.cbs, c.ebs));
  });
});

describe('RFC 2698 (trTCM), sequences worked by hand', () => {
  it.each(trCases)('$name', (c) => {
    const originMs = c.originMs ?? 0;
    const m = new trTCM({
      pir: c.pir.input,
      pbs: c.pbs,
      cir: c.cir.input,
      cbs: c.cbs,
      mode: c.mode,
      clock: manualClock(originMs),
    });
    runSteps(c.steps, originMs, m, new RfcTrTcm(c.pir.exact, c.pbs, c.cir.exact, c.cbs));
  });
});

// ---------------------------------------------------------------------------
// Random sequences.

/** A packet: the nanoseconds since the one before, its size and its pre-colour. */
interface Packet {
  gapNs: number;
  size: number;
  pre: Color;
}

const wholeMs = fc.integer({ min: 0, max: 40 }).map((n) => n * 1_000_000);
const fractionalNs = fc.integer({ min: 0, max: 3_000_000 });
const idleNs = fc.integer({ min: 1_000_000_000, max: 30_000_000_000_000 }); // 1 s to 8 h
const mixedGaps = fc.oneof(
  { weight: 6, arbitrary: fractionalNs },
  { weight: 2, arbitrary: wholeMs },
  { weight: 1, arbitrary: idleNs },
);

function packets(gap: fc.Arbitrary<number>, maxSize: number): fc.Arbitrary<Packet[]> {
  const packet = fc.record({
    gapNs: gap,
    size: fc.integer({ min: 0, max: maxSize }),
    pre: fc.constantFrom<Color>('green', 'yellow', 'red'),
  });
  return fc.array(packet, { maxLength: 60 });
}

const rateForms: RateCase[] = [
  rate(1000, 1000n),
  rate(1250, 1250n),
  rate(3000, 3000n),
  rate('8kbit', 1000n),
  rate(0.5, 1n, 2n),
  rate(2.5, 5n, 2n),
  rate('100/min', 5n, 3n),
  rate(7 / 3, 7n, 3n),
  rate(1e6 / 7, 1_000_000n, 7n),
  rate(46_000_000, 46_000_000n),
  rate('1MiB/s', 1_048_576n),
  rate('10GiB/s', 10_737_418_240n), // idle periods of seconds take the BigInt path
  rate(1_234_567 / 7_654_321, 1_234_567n, 7_654_321n), // a fraction too large for doubles: BigInt always
];

/** The RFC 2698 condition PIR >= CIR, exactly. */
function atLeast(a: ExactRate, b: ExactRate): boolean {
  return a.p * b.q >= b.p * a.q;
}

interface SrRun {
  cir: RateCase;
  cbs: number;
  ebs: number;
  aware: boolean;
  originNs: number;
  packets: Packet[];
}

interface TrRun {
  pir: RateCase;
  pbs: number;
  cir: RateCase;
  cbs: number;
  aware: boolean;
  originNs: number;
  packets: Packet[];
}

function checkSr(run: SrRun): void {
  fc.pre(run.cbs + run.ebs > 0);
  const mode: ColorMode = run.aware ? 'color-aware' : 'color-blind';
  const m = new srTCM({ cir: run.cir.input, cbs: run.cbs, ebs: run.ebs, mode, clock: manualClock(run.originNs / 1e6) });
  const reference = new RfcSrTcm(run.cir.exact, run.cbs, run.ebs);
  let ns = 0n;
  for (const p of run.packets) {
    ns += BigInt(p.gapNs);
    const ms = msOf(BigInt(run.originNs) + ns);
    const pre = run.aware ? p.pre : undefined;
    expect(m.markAt(ms, p.size, pre)).toBe(reference.mark(ns, p.size, pre));
    expect(m.tokensAt(ms)).toEqual(reference.tokens);
  }
}

function checkTr(run: TrRun): void {
  fc.pre(atLeast(run.pir.exact, run.cir.exact));
  const mode: ColorMode = run.aware ? 'color-aware' : 'color-blind';
  const m = new trTCM({
    pir: run.pir.input,
    pbs: run.pbs,
    cir: run.cir.input,
    cbs: run.cbs,
    mode,
    clock: manualClock(run.originNs / 1e6),
  });
  const reference = new RfcTrTcm(run.pir.exact, run.pbs, run.cir.exact, run.cbs);
  let ns = 0n;
  for (const p of run.packets) {
    ns += BigInt(p.gapNs);
    const ms = msOf(BigInt(run.originNs) + ns);
    const pre = run.aware ? p.pre : undefined;
    expect(m.markAt(ms, p.size, pre)).toBe(reference.mark(ns, p.size, pre));
    expect(m.tokensAt(ms)).toEqual(reference.tokens);
  }
}

const bucket = fc.integer({ min: 0, max: 100 });
const positiveBucket = fc.integer({ min: 1, max: 100 });
const cir1000 = fc.constant(rate(1000, 1000n));
const anyRate = fc.constantFrom(...rateForms);
const zero = fc.constant(0);
/** performance.now() a few seconds to twelve days after the process started. */
const uptimeNs = fc.integer({ min: 1_000_000_000, max: 1_000_000_000_000_000 });

function srRuns(o: {
  cir: fc.Arbitrary<RateCase>;
  aware: fc.Arbitrary<boolean>;
  origin: fc.Arbitrary<number>;
  gaps: fc.Arbitrary<number>;
}): fc.Arbitrary<SrRun> {
  return fc.record({
    cir: o.cir,
    cbs: bucket,
    ebs: bucket,
    aware: o.aware,
    originNs: o.origin,
    packets: packets(o.gaps, 120),
  });
}

function trRuns(o: {
  pir: fc.Arbitrary<RateCase>;
  cir: fc.Arbitrary<RateCase>;
  aware: fc.Arbitrary<boolean>;
  origin: fc.Arbitrary<number>;
  gaps: fc.Arbitrary<number>;
}): fc.Arbitrary<TrRun> {
  return fc.record({
    pir: o.pir,
    pbs: positiveBucket,
    cir: o.cir,
    cbs: positiveBucket,
    aware: o.aware,
    originNs: o.origin,
    packets: packets(o.gaps, 120),
  });
}

describe('RFC 2697 (srTCM): random sequences colour every packet as the reference does', () => {
  const blind = fc.constant(false);
  const aware = fc.constant(true);
  it.each([
    ['colour-blind, whole-millisecond gaps', srRuns({ cir: cir1000, aware: blind, origin: zero, gaps: wholeMs })],
    ['colour-aware, whole-millisecond gaps', srRuns({ cir: cir1000, aware, origin: zero, gaps: wholeMs })],
    [
      'colour-blind, gaps in nanoseconds (fractional milliseconds)',
      srRuns({
        cir: fc.constantFrom(rate(1000, 1000n), rate(1250, 1250n)),
        aware: blind,
        origin: zero,
        gaps: fractionalNs,
      }),
    ],
    [
      'colour-aware, gaps in nanoseconds',
      srRuns({ cir: fc.constantFrom(rate(1000, 1000n), rate(1250, 1250n)), aware, origin: zero, gaps: fractionalNs }),
    ],
    ['long idle periods between bursts', srRuns({ cir: anyRate, aware: fc.boolean(), origin: zero, gaps: mixedGaps })],
    [
      'a performance.now()-style origin (seconds to days of uptime)',
      srRuns({ cir: anyRate, aware: fc.boolean(), origin: uptimeNs, gaps: fractionalNs }),
    ],
    [
      'rates of every form: fractions, per minute, bit rates, tens of millions a second',
      srRuns({ cir: anyRate, aware: fc.boolean(), origin: uptimeNs, gaps: mixedGaps }),
    ],
  ])('%s', (_name, runs) => {
    fc.assert(fc.property(runs, checkSr));
  });
});

describe('RFC 2698 (trTCM): random sequences colour every packet as the reference does', () => {
  const blind = fc.constant(false);
  const aware = fc.constant(true);
  const pir3000 = fc.constant(rate(3000, 3000n));
  const fractionalPir = fc.constantFrom(rate(1250, 1250n), rate(3000, 3000n));
  it.each([
    [
      'colour-blind, whole-millisecond gaps',
      trRuns({ pir: pir3000, cir: cir1000, aware: blind, origin: zero, gaps: wholeMs }),
    ],
    [
      'colour-aware, whole-millisecond gaps',
      trRuns({ pir: pir3000, cir: cir1000, aware, origin: zero, gaps: wholeMs }),
    ],
    [
      'colour-blind, gaps in nanoseconds (fractional milliseconds)',
      trRuns({ pir: fractionalPir, cir: cir1000, aware: blind, origin: zero, gaps: fractionalNs }),
    ],
    [
      'colour-aware, gaps in nanoseconds',
      trRuns({ pir: fractionalPir, cir: cir1000, aware, origin: zero, gaps: fractionalNs }),
    ],
    [
      'long idle periods between bursts',
      trRuns({ pir: anyRate, cir: anyRate, aware: fc.boolean(), origin: zero, gaps: mixedGaps }),
    ],
    [
      'a performance.now()-style origin (seconds to days of uptime)',
      trRuns({ pir: anyRate, cir: anyRate, aware: fc.boolean(), origin: uptimeNs, gaps: fractionalNs }),
    ],
    [
      'rates of every form: fractions, per minute, bit rates, tens of millions a second',
      trRuns({ pir: anyRate, cir: anyRate, aware: fc.boolean(), origin: uptimeNs, gaps: mixedGaps }),
    ],
  ])('%s', (_name, runs) => {
    fc.assert(fc.property(runs, checkTr));
  });
});

// ---------------------------------------------------------------------------
// A million packets: the totals come out exactly, with no drift and no lost credit.

/** A small seeded generator (mulberry32), so a long run is the same every time. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MILLION = 1_000_000;
/** One day of uptime and a fraction, in nanoseconds. */
const DAY_NS = 86_400_000_123_456n;

describe('a million packets: exact totals, no drift', () => {
  it('srTCM, 1-byte packets arriving faster than the tokens: green = CBS + every update due, yellow = EBS', () => {
    const cir = rate(1_000_000, 1_000_000n); // one update a microsecond
    const cbs = 1500;
    const ebs = 3000;
    const m = new srTCM({ cir: cir.input, cbs, ebs, clock: manualClock(msOf(DAY_NS)) });
    const random = seeded(1);
    const count = { green: 0, yellow: 0, red: 0 };
    let ns = 0n;
    for (let i = 0; i < MILLION; i++) {
      ns += BigInt(Math.floor(random() * 901)); // 0 to 900 ns: at most one update between packets
      count[m.markAt(msOf(DAY_NS + ns), 1)]++;
    }
    const due = Number(updatesDue(cir.exact, ns));
    const { tc, te } = m.tokensAt(msOf(DAY_NS + ns));
    expect(te).toBe(0);
    expect(count.green + tc).toBe(cbs + due);
    expect(count.yellow).toBe(ebs);
    expect(count.red).toBe(MILLION - count.green - count.yellow);
  }, 60_000);

  it('trTCM, the same: green = CBS + C’s updates, green + yellow = PBS + P’s updates', () => {
    const pir = rate(2_000_000, 2_000_000n);
    const cir = rate(1_000_000, 1_000_000n);
    const pbs = 3000;
    const cbs = 1500;
    const m = new trTCM({ pir: pir.input, pbs, cir: cir.input, cbs, clock: manualClock(msOf(DAY_NS)) });
    const random = seeded(2);
    const count = { green: 0, yellow: 0, red: 0 };
    let ns = 0n;
    for (let i = 0; i < MILLION; i++) {
      ns += BigInt(Math.floor(random() * 451)); // 0 to 450 ns: at most one update of P between packets
      count[m.markAt(msOf(DAY_NS + ns), 1)]++;
    }
    const { tp, tc } = m.tokensAt(msOf(DAY_NS + ns));
    expect(count.green + tc).toBe(cbs + Number(updatesDue(cir.exact, ns)));
    expect(count.green + count.yellow + tp).toBe(pbs + Number(updatesDue(pir.exact, ns)));
  }, 60_000);

  it('both, random sizes and times with idle periods: every colour and every total as the reference', () => {
    const random = seeded(3);
    const cir = rate(1_000_000, 1_000_000n);
    const pir = rate(1_500_000, 1_500_000n);
    const sr = new srTCM({ cir: cir.input, cbs: 40, ebs: 60, clock: manualClock(msOf(DAY_NS)) });
    const tr = new trTCM({ pir: pir.input, pbs: 60, cir: cir.input, cbs: 40, clock: manualClock(msOf(DAY_NS)) });
    const srRef = new RfcSrTcm(cir.exact, 40, 60);
    const trRef = new RfcTrTcm(pir.exact, 60, cir.exact, 40);
    const bytes = { sr: { green: 0, yellow: 0, red: 0 }, tr: { green: 0, yellow: 0, red: 0 } };
    const refBytes = { sr: { green: 0, yellow: 0, red: 0 }, tr: { green: 0, yellow: 0, red: 0 } };
    let differ = 0;
    let ns = 0n;
    for (let i = 0; i < MILLION; i++) {
      const idle = i % 50_000 === 49_999;
      ns += BigInt(Math.floor(random() * (idle ? 10_000_000_000 : 2001)));
      const size = Math.floor(random() * 3);
      const ms = msOf(DAY_NS + ns);
      const a = sr.markAt(ms, size);
      const b = srRef.mark(ns, size);
      const c = tr.markAt(ms, size);
      const d = trRef.mark(ns, size);
      bytes.sr[a] += size;
      refBytes.sr[b] += size;
      bytes.tr[c] += size;
      refBytes.tr[d] += size;
      if (a !== b || c !== d) differ++;
    }
    expect(differ).toBe(0);
    expect(bytes).toEqual(refBytes);
  }, 120_000);
});
