/**
 * srTCM and trTCM: options, validation, the `refill` choice, and the edges of
 * the whole-token clock (non-finite and epoch-sized times, the rate read as a
 * fraction). The RFCs' behaviour is in tcm.rfc.test.ts (hand-worked sequences
 * and a literal transcription of the RFCs); DPDK's cases in tcm.dpdk.test.ts.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Color, srTCM, trTCM } from '../../src/index.js';
import { simplestFraction } from '../../src/meters/tcm.js';
import { manualClock } from '../helpers/fake-clock.js';

describe('srTCM', () => {
  it('checks a packet against C, then E, never split across both', () => {
    const m = new srTCM({ cir: 1000, cbs: 1000, ebs: 1000, clock: manualClock() });
    m.mark(600); // green: Tc 400
    m.mark(600); // yellow: Te 400
    expect(m.mark(500)).toBe('red'); // 400 + 400 would hold it, but neither bucket alone does
    expect(m.mark(400)).toBe('green');
  });

  it('a packet larger than both buckets is red, not an error; CBS 0 makes everything yellow or red', () => {
    const m = new srTCM({ cir: 1000, cbs: 1500, ebs: 3000, clock: manualClock() });
    expect(m.mark(5000)).toBe('red');
    const e = new srTCM({ cir: 1000, cbs: 0, ebs: 3000, clock: manualClock() });
    expect(e.mark(1)).toBe('yellow');
  });

  it('reads the time from its clock: mark and tokens are markAt and tokensAt now', () => {
    const clock = manualClock(10_000);
    const m = new srTCM({ cir: 1000, cbs: 10, ebs: 0, clock });
    expect(m.mark(10)).toBe('green');
    clock.advance(3.5);
    expect(m.tokens).toEqual({ tc: 3, te: 0 });
    expect(m.tokensAt(10_004)).toEqual({ tc: 4, te: 0 });
    expect(m.tokens).toEqual({ tc: 3, te: 0 }); // looking ahead changed nothing
  });

  it('refuses a missing or unknown pre-colour, and a colour given to a colour-blind marker', () => {
    const aware = new srTCM({ cir: 1000, cbs: 1000, ebs: 1000, mode: 'color-aware', clock: manualClock() });
    expect(() => aware.mark(1)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'preColor' }));
    expect(() => aware.mark(1, 'blue' as Color)).toThrow(/expected 'green', 'yellow' or 'red'/);
    const blind = new srTCM({ cir: 1000, cbs: 1000, ebs: 1000, clock: manualClock() });
    expect(() => blind.mark(1, 'green')).toThrow(/color-aware/);
    expect(blind.tokens).toEqual({ tc: 1000, te: 1000 }); // a refused call takes nothing
  });

  it('validates its options with coded errors', () => {
    const clock = manualClock();
    expect(() => new srTCM({ cir: 0, cbs: 1, ebs: 1, clock })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_RATE' }),
    );
    expect(() => new srTCM({ cir: 1, cbs: 0, ebs: 0, clock })).toThrow(/at least one must be above 0/);
    expect(() => new srTCM({ cir: 1, cbs: -1, ebs: 1, clock })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_SIZE' }),
    );
    expect(() => new srTCM({ cir: 1, cbs: 1, ebs: 1, mode: 'aware' as 'color-aware', clock })).toThrow(/mode/);
    const m = new srTCM({ cir: '8kbit', cbs: '1KiB', ebs: 0, clock });
    expect(m.params).toEqual({ cir: 1000, cbs: 1024, ebs: 0 });
    expect(() => m.mark(-1)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_SIZE' }));
    expect(() => m.mark(Number.NaN)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_SIZE' }));
  });
});

describe('trTCM', () => {
  it('refuses pir below cir, and zero bucket sizes', () => {
    const clock = manualClock();
    expect(() => new trTCM({ pir: 500, pbs: 1, cir: 1000, cbs: 1, clock })).toThrow(/at least cir/);
    expect(() => new trTCM({ pir: 2000, pbs: 0, cir: 1000, cbs: 1, clock })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_SIZE' }),
    );
  });

  it('reads the time from its clock', () => {
    const clock = manualClock();
    const m = new trTCM({ pir: 2000, pbs: 10, cir: 1000, cbs: 10, clock });
    expect(m.mark(10)).toBe('green');
    clock.advance(2.7);
    expect(m.tokens).toEqual({ tp: 5, tc: 2 });
    expect(m.mark(3)).toBe('yellow');
  });
});

describe('the refill option', () => {
  it("defaults to 'discrete', the RFCs' whole tokens", () => {
    const clock = manualClock();
    expect(new srTCM({ cir: 1, cbs: 1, ebs: 1, clock }).refill).toBe('discrete');
    expect(new trTCM({ pir: 1, pbs: 1, cir: 1, cbs: 1, refill: 'discrete', clock }).refill).toBe('discrete');
  });

  it("'continuous' adds fractions of a token: not the RFC form, stricter at fractional times (issue 22's examples)", () => {
    const sr = new srTCM({ cir: 1250, cbs: 10, ebs: 20, refill: 'continuous', clock: manualClock() });
    expect(sr.refill).toBe('continuous');
    expect(sr.markAt(0, 20)).toBe('yellow');
    expect(sr.markAt(1, 10)).toBe('green');
    expect(sr.tokensAt(2.5)).toEqual({ tc: 1.875, te: 1.25 }); // the RFC has 2 and 1
    expect(sr.markAt(2.5, 2)).toBe('red'); // the RFC: green

    const tr = new trTCM({ pir: 1250, pbs: 10, cir: 1250, cbs: 10, refill: 'continuous', clock: manualClock() });
    expect(tr.markAt(0.5, 10)).toBe('green');
    expect(tr.tokensAt(1.75)).toEqual({ tp: 1.5625, tc: 1.5625 }); // the RFC has 2 and 2
    expect(tr.markAt(1.75, 2)).toBe('red'); // the RFC: green
  });

  it('refuses anything else, with a coded error', () => {
    const clock = manualClock();
    expect(() => new srTCM({ cir: 1, cbs: 1, ebs: 1, refill: 'rfc' as 'discrete', clock })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'refill' }),
    );
    expect(() => new trTCM({ pir: 1, pbs: 1, cir: 1, cbs: 1, refill: 'lazy' as 'discrete', clock })).toThrow(
      /'discrete' \(the RFCs' whole tokens\) or 'continuous'/,
    );
  });
});

describe('the whole-token clock', () => {
  it('a time that is not a finite number counts as no time at all', () => {
    const m = new srTCM({ cir: 1000, cbs: 2, ebs: 0, clock: manualClock() });
    m.markAt(0, 2);
    expect(m.markAt(Number.NaN, 1)).toBe('red');
    expect(m.markAt(Number.POSITIVE_INFINITY, 1)).toBe('red');
    expect(m.tokensAt(Number.POSITIVE_INFINITY)).toEqual({ tc: 0, te: 0 });
    expect(m.markAt(1, 1)).toBe('green'); // the schedule is intact
  });

  it('an epoch-sized clock (Date.now()-style milliseconds) still gets a token every millisecond exactly', () => {
    const start = 1_767_225_600_000; // 2026-01-01 in ms: above 2^53 ns
    const m = new srTCM({ cir: 1000, cbs: 1, ebs: 0, clock: manualClock(start) });
    m.markAt(start, 1);
    for (let ms = 1; ms <= 10_000; ms++) {
      expect(m.markAt(start + ms - 0.5, 1)).toBe('red');
      expect(m.markAt(start + ms, 1)).toBe('green');
    }
  });

  it('counts exactly across the step where doubles hand over to BigInt (about 2.1 s at 10 GiB/s)', () => {
    // 10 GiB/s is 4194304 / 390625 tokens a ns: steps above ~2.1e9 ns leave the doubles' exact range.
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1_900_000_000, max: 2_300_000_000 }), { maxLength: 20 }), (gaps) => {
        const m = new srTCM({ cir: '10GiB/s', cbs: 1e15, ebs: 0, clock: manualClock(1000) });
        m.markAt(1000, 1e15); // empty, so no token is capped away
        let ns = 0n;
        for (const gap of gaps) {
          ns += BigInt(gap);
          const due = (ns * 10_737_418_240n) / 1_000_000_000n;
          expect(m.tokensAt(1000 + Number(ns) / 1e6)).toEqual({ tc: Number(due), te: 0 });
          m.markAt(1000 + Number(ns) / 1e6, 0);
        }
      }),
    );
  });

  it('reads a rate as the simplest fraction that the number stands for', () => {
    expect(simplestFraction(1250)).toEqual([1250n, 1n]);
    expect(simplestFraction(100 / 60)).toEqual([5n, 3n]);
    expect(simplestFraction(0.1)).toEqual([1n, 10n]);
    expect(simplestFraction(0.5)).toEqual([1n, 2n]);
    expect(simplestFraction(2 ** 60)).toEqual([2n ** 60n, 1n]);
    expect(simplestFraction(Number.MIN_VALUE)[1]).toBeGreaterThan(2n ** 1000n);
  });

  it('recovers p / q from the double p / q, and what it returns rounds back to the number', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000_000 }), fc.integer({ min: 1, max: 1_000_000 }), (p, q) => {
        const [n, d] = simplestFraction(p / q);
        expect(n * BigInt(q)).toBe(BigInt(p) * d); // the same fraction
        expect(Number(n) / Number(d)).toBe(p / q);
      }),
    );
    fc.assert(
      fc.property(fc.double({ min: 1e-3, max: 1e6, noNaN: true }), (x) => {
        const [n, d] = simplestFraction(x);
        expect(Number(n) / Number(d)).toBe(x);
      }),
    );
  });
});
