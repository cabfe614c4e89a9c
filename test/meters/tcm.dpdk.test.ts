/**
 * The cases of DPDK's meter test, app/test/test_meter.c (DPDK/dpdk, read at
 * commit 38f72e500b3b), for the markers it shares with tokenpace: srTCM and
 * trTCM (RFC 4115's variant is not in tokenpace). Written here in our own
 * code, case by case:
 *
 * - configuration: what `rte_meter_*_profile_config` refuses and accepts. Its
 *   three NULL-pointer cases are one case here: no options object.
 * - colour-blind: a fresh meter, a packet one second after configuration (so
 *   both buckets are full: the rates are tens of millions a second) of
 *   CBS - 1, CBS + 1, EBS (or PBS) - 1 and EBS (or PBS) + 1 bytes.
 * - colour-aware: the same four sizes, each pre-coloured green, yellow and red.
 *
 * DPDK counts time in CPU cycles; tokenpace in the clock's milliseconds. The
 * test's "now + hz" is "origin + 1000 ms" here.
 */

import { describe, expect, it } from 'vitest';
import { type Color, type SrTcmOptions, srTCM, type TrTcmOptions, trTCM } from '../../src/index.js';
import { manualClock } from '../helpers/fake-clock.js';

// TM_TEST_SRTCM_*_DF and TM_TEST_TRTCM_*_DF.
const SRTCM = { cir: 46_000_000, cbs: 2048, ebs: 4096 };
const TRTCM = { cir: 46_000_000, pir: 69_000_000, cbs: 2048, pbs: 4096 };

/** Where rte_get_tsc_cycles() was at configuration: any time will do; a performance.now()-style one. */
const ORIGIN_MS = 52_345.678901;
const ONE_SECOND_LATER = ORIGIN_MS + 1000;

function sr(overrides: Partial<SrTcmOptions> = {}): srTCM {
  return new srTCM({ ...SRTCM, clock: manualClock(ORIGIN_MS), ...overrides });
}

function tr(overrides: Partial<TrTcmOptions> = {}): trTCM {
  return new trTCM({ ...TRTCM, clock: manualClock(ORIGIN_MS), ...overrides });
}

describe('test_meter.c: tm_test_srtcm_config', () => {
  it.each<[string, () => unknown, string | undefined]>([
    ['no parameters (the NULL cases)', () => new srTCM(null as unknown as SrTcmOptions), 'ERR_INVALID_OPTION'],
    ['cbs and ebs both 0', () => sr({ cbs: 0, ebs: 0 }), 'ERR_INVALID_OPTION'],
    ['cir 0', () => sr({ cir: 0 }), 'ERR_INVALID_RATE'],
    ['ebs 0 (one of them may be 0)', () => sr({ ebs: 0 }), undefined],
    ['cbs 0', () => sr({ cbs: 0 }), undefined],
    ['the usual parameters', () => sr(), undefined],
  ])('%s', (_name, configure, code) => {
    if (code === undefined) expect(configure).not.toThrow();
    else expect(configure).toThrow(expect.objectContaining({ code }));
  });
});

describe('test_meter.c: tm_test_trtcm_config', () => {
  it.each<[string, () => unknown, string]>([
    ['no parameters (the NULL cases)', () => new trTCM(null as unknown as TrTcmOptions), 'ERR_INVALID_OPTION'],
    ['cir 0', () => tr({ cir: 0 }), 'ERR_INVALID_RATE'],
    ['cbs 0', () => tr({ cbs: 0 }), 'ERR_INVALID_SIZE'],
    ['pbs 0', () => tr({ pbs: 0 }), 'ERR_INVALID_SIZE'],
    ['pir 0', () => tr({ pir: 0 }), 'ERR_INVALID_RATE'],
    ['pir < cir', () => tr({ pir: TRTCM.cir - 1 }), 'ERR_INVALID_OPTION'],
  ])('refuses %s', (_name, configure, code) => {
    expect(configure).toThrow(expect.objectContaining({ code }));
  });

  it('accepts the usual parameters', () => {
    expect(() => tr()).not.toThrow();
  });
});

describe('test_meter.c: tm_test_srtcm_color_blind_check', () => {
  it.each<[number, Color]>([
    [SRTCM.cbs - 1, 'green'],
    [SRTCM.cbs + 1, 'yellow'],
    [SRTCM.ebs - 1, 'yellow'],
    [SRTCM.ebs + 1, 'red'],
  ])('%i bytes one second later: %s', (size, colour) => {
    expect(sr().markAt(ONE_SECOND_LATER, size)).toBe(colour);
  });
});

describe('test_meter.c: tm_test_trtcm_color_blind_check', () => {
  it.each<[number, Color]>([
    [TRTCM.cbs - 1, 'green'],
    [TRTCM.cbs + 1, 'yellow'],
    [TRTCM.pbs - 1, 'yellow'],
    [TRTCM.pbs + 1, 'red'],
  ])('%i bytes one second later: %s', (size, colour) => {
    expect(tr().markAt(ONE_SECOND_LATER, size)).toBe(colour);
  });
});

/** tm_test_*_color_aware_check: the four sizes pre-coloured `pre`, and the colours expected. */
function awareRows(sizes: number[], table: [Color, Color[]][]): [Color, number, Color][] {
  return table.flatMap(([pre, out]) => sizes.map((size, i) => [pre, size, out[i] as Color] as [Color, number, Color]));
}

describe('test_meter.c: tm_test_srtcm_color_aware_check', () => {
  it.each(
    awareRows(
      [SRTCM.cbs - 1, SRTCM.cbs + 1, SRTCM.ebs - 1, SRTCM.ebs + 1],
      [
        ['green', ['green', 'yellow', 'yellow', 'red']], // a green packet: as if colour-blind
        ['yellow', ['yellow', 'yellow', 'yellow', 'red']], // green & yellow = yellow
        ['red', ['red', 'red', 'red', 'red']], // red stays red
      ],
    ),
  )('pre-%s, %i bytes: %s', (pre, size, colour) => {
    expect(sr({ mode: 'color-aware' }).markAt(ONE_SECOND_LATER, size, pre)).toBe(colour);
  });
});

describe('test_meter.c: tm_test_trtcm_color_aware_check', () => {
  it.each(
    awareRows(
      [TRTCM.cbs - 1, TRTCM.cbs + 1, TRTCM.pbs - 1, TRTCM.pbs + 1],
      [
        ['green', ['green', 'yellow', 'yellow', 'red']],
        ['yellow', ['yellow', 'yellow', 'yellow', 'red']],
        ['red', ['red', 'red', 'red', 'red']],
      ],
    ),
  )('pre-%s, %i bytes: %s', (pre, size, colour) => {
    expect(tr({ mode: 'color-aware' }).markAt(ONE_SECOND_LATER, size, pre)).toBe(colour);
  });
});
