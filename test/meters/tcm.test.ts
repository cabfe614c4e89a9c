/**
 * srTCM (RFC 2697) and trTCM (RFC 2698) against sequences worked by hand from
 * the RFCs' text, and against a literal transcription of the RFCs' discrete
 * algorithms (the buckets updated one token at a time, CIR/PIR times a second).
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Color, srTCM, trTCM } from '../../src/index.js';
import { manualClock } from '../helpers/fake-clock.js';

describe('srTCM (RFC 2697), colour-blind', () => {
  it('the worked example: green while C lasts, yellow from E, then red; refill goes to C first', () => {
    const clock = manualClock();
    const m = new srTCM({ cir: 1000, cbs: 1500, ebs: 3000, clock });
    expect([m.mark(1000), m.mark(1000), m.mark(1000), m.mark(1000)]).toEqual(['green', 'yellow', 'yellow', 'yellow']);
    expect(m.tokens).toEqual({ tc: 500, te: 0 });
    expect(m.mark(1000)).toBe('red');
    expect(m.tokens).toEqual({ tc: 500, te: 0 }); // red decrements nothing
    clock.set(1000);
    expect(m.tokens).toEqual({ tc: 1500, te: 0 }); // C took all 1000, no overflow
    expect(m.mark(1000)).toBe('green');
    expect(m.mark(1000)).toBe('red'); // Tc 500, Te 0
  });

  it('E fills only with what overflows C', () => {
    const clock = manualClock();
    const m = new srTCM({ cir: 1000, cbs: 1500, ebs: 3000, clock });
    m.mark(1500); // green, Tc 0
    m.mark(3000); // yellow, Te 0
    clock.set(1000);
    expect(m.tokens).toEqual({ tc: 1000, te: 0 });
    clock.set(2000);
    expect(m.tokens).toEqual({ tc: 1500, te: 500 });
    clock.set(100_000);
    expect(m.tokens).toEqual({ tc: 1500, te: 3000 }); // both capped
  });

  it('a packet is checked against C, then E, never split across both', () => {
    const clock = manualClock();
    const m = new srTCM({ cir: 1000, cbs: 1000, ebs: 1000, clock });
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
});

describe('srTCM (RFC 2697), colour-aware', () => {
  it('pre-green follows the blind rules; pre-yellow uses only E; pre-red stays red and takes nothing', () => {
    const m = new srTCM({ cir: 1000, cbs: 1000, ebs: 1000, mode: 'color-aware', clock: manualClock() });
    expect(m.mark(100, 'red')).toBe('red');
    expect(m.tokens).toEqual({ tc: 1000, te: 1000 });
    expect(m.mark(300, 'yellow')).toBe('yellow'); // never greener, even with C full
    expect(m.tokens).toEqual({ tc: 1000, te: 700 });
    expect(m.mark(800, 'green')).toBe('green');
    expect(m.mark(800, 'green')).toBe('red'); // Tc 200, Te 700: fits neither
    expect(m.mark(700, 'green')).toBe('yellow'); // Tc 200 is short: E
    expect(m.mark(100, 'yellow')).toBe('red'); // Te 0, and yellow may not use C
    expect(m.mark(100, 'green')).toBe('green');
  });

  it('refuses a missing or unknown pre-colour, and a colour given to a colour-blind marker', () => {
    const aware = new srTCM({ cir: 1000, cbs: 1000, ebs: 1000, mode: 'color-aware', clock: manualClock() });
    expect(() => aware.mark(1)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'preColor' }));
    expect(() => aware.mark(1, 'blue' as Color)).toThrow(/expected 'green', 'yellow' or 'red'/);
    const blind = new srTCM({ cir: 1000, cbs: 1000, ebs: 1000, clock: manualClock() });
    expect(() => blind.mark(1, 'green')).toThrow(/color-aware/);
  });
});

describe('srTCM options', () => {
  it('validates with coded errors', () => {
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

  it('time going backwards adds no tokens', () => {
    const clock = manualClock(5000);
    const m = new srTCM({ cir: 1000, cbs: 1000, ebs: 1000, clock });
    m.mark(1000);
    clock.set(0);
    expect(m.tokens).toEqual({ tc: 0, te: 1000 });
    clock.set(5500);
    expect(m.tokens).toEqual({ tc: 500, te: 1000 });
  });
});

describe('trTCM (RFC 2698), colour-blind', () => {
  it('red above the peak, yellow above the committed rate, green within both', () => {
    const clock = manualClock();
    const m = new trTCM({ pir: 2000, pbs: 2000, cir: 1000, cbs: 1000, clock });
    expect(m.mark(600)).toBe('green'); // Tp 1400, Tc 400
    expect(m.mark(600)).toBe('yellow'); // Tc short: Tp 800
    expect(m.tokens).toEqual({ tp: 800, tc: 400 });
    expect(m.mark(900)).toBe('red'); // Tp short: nothing taken
    expect(m.mark(400)).toBe('green'); // Tp 400, Tc 0
    clock.set(250); // P earns 500, C 250
    expect(m.tokens).toEqual({ tp: 900, tc: 250 });
    expect(m.mark(300)).toBe('yellow');
    expect(m.mark(250)).toBe('green');
    expect(m.tokens).toEqual({ tp: 350, tc: 0 });
  });

  it('colour-aware: never greener than the pre-colour; pre-red takes nothing; pre-yellow takes only from P', () => {
    const m = new trTCM({ pir: 2000, pbs: 2000, cir: 1000, cbs: 1000, mode: 'color-aware', clock: manualClock() });
    expect(m.mark(100, 'red')).toBe('red');
    expect(m.tokens).toEqual({ tp: 2000, tc: 1000 });
    expect(m.mark(500, 'yellow')).toBe('yellow');
    expect(m.tokens).toEqual({ tp: 1500, tc: 1000 });
    expect(m.mark(900, 'green')).toBe('green');
    expect(m.mark(200, 'green')).toBe('yellow'); // Tc 100 is short
    expect(m.mark(500, 'yellow')).toBe('red'); // Tp 400 is short
    expect(m.tokens).toEqual({ tp: 400, tc: 100 });
  });

  it('refuses pir below cir, and zero bucket sizes', () => {
    const clock = manualClock();
    expect(() => new trTCM({ pir: 500, pbs: 1, cir: 1000, cbs: 1, clock })).toThrow(/at least cir/);
    expect(() => new trTCM({ pir: 2000, pbs: 0, cir: 1000, cbs: 1, clock })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_SIZE' }),
    );
  });
});

/** The RFCs' discrete algorithms, transcribed literally: tokens arrive one at a time. */
class RfcSrTcm {
  tc: number;
  te: number;
  constructor(
    readonly cbs: number,
    readonly ebs: number,
  ) {
    this.tc = cbs;
    this.te = ebs;
  }
  /** One of the CIR updates a second. */
  tick(): void {
    if (this.tc < this.cbs) this.tc++;
    else if (this.te < this.ebs) this.te++;
  }
  mark(b: number, pre: Color | undefined): Color {
    // RFC 2697, section 3: blind mode is aware mode with every packet pre-green.
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
}

class RfcTrTcm {
  tp: number;
  tc: number;
  constructor(
    readonly pbs: number,
    readonly cbs: number,
  ) {
    this.tp = pbs;
    this.tc = cbs;
  }
  tickP(): void {
    if (this.tp < this.pbs) this.tp++;
  }
  tickC(): void {
    if (this.tc < this.cbs) this.tc++;
  }
  mark(b: number, pre: Color | undefined): Color {
    if (pre === 'red' || this.tp - b < 0) return 'red';
    if (pre === 'yellow' || this.tc - b < 0) {
      this.tp -= b;
      return 'yellow';
    }
    this.tp -= b;
    this.tc -= b;
    return 'green';
  }
}

const packet = fc.record({
  gapMs: fc.integer({ min: 0, max: 40 }),
  size: fc.integer({ min: 0, max: 120 }),
  pre: fc.constantFrom<Color>('green', 'yellow', 'red'),
});

describe('the lazy refill colours every packet exactly as the RFCs’ one-token-at-a-time updates do', () => {
  it('srTCM, both modes (CIR 1000/s: one update per ms)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 0, max: 100 }),
        fc.boolean(),
        fc.array(packet, { maxLength: 60 }),
        (cbs, ebs, aware, packets) => {
          fc.pre(cbs + ebs > 0);
          const clock = manualClock();
          const m = new srTCM({ cir: 1000, cbs, ebs, mode: aware ? 'color-aware' : 'color-blind', clock });
          const rfc = new RfcSrTcm(cbs, ebs);
          for (const p of packets) {
            for (let i = 0; i < p.gapMs; i++) rfc.tick();
            clock.advance(p.gapMs);
            const pre = aware ? p.pre : undefined;
            expect(m.mark(p.size, pre)).toBe(rfc.mark(p.size, pre));
          }
          expect(m.tokens).toEqual({ tc: rfc.tc, te: rfc.te });
        },
      ),
    );
  });

  it('trTCM, both modes (PIR 3000/s, CIR 1000/s: three P updates and one C update per ms)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 150 }),
        fc.integer({ min: 1, max: 100 }),
        fc.boolean(),
        fc.array(packet, { maxLength: 60 }),
        (pbs, cbs, aware, packets) => {
          const clock = manualClock();
          const m = new trTCM({ pir: 3000, pbs, cir: 1000, cbs, mode: aware ? 'color-aware' : 'color-blind', clock });
          const rfc = new RfcTrTcm(pbs, cbs);
          for (const p of packets) {
            for (let i = 0; i < p.gapMs; i++) {
              rfc.tickP();
              rfc.tickP();
              rfc.tickP();
              rfc.tickC();
            }
            clock.advance(p.gapMs);
            const pre = aware ? p.pre : undefined;
            expect(m.mark(p.size, pre)).toBe(rfc.mark(p.size, pre));
          }
          expect(m.tokens).toEqual({ tp: rfc.tp, tc: rfc.tc });
        },
      ),
    );
  });
});
