import { describe, expect, it } from 'vitest';
import { checkKnownOptions, closestName, InvalidOptionError } from '../src/errors.js';

const known = new Set(['rate', 'burst', 'clock', 'maxKeys', 'concurrency']);

describe('checkKnownOptions', () => {
  it('passes known names, and unknown ones whose value is undefined (a spread of optional fields)', () => {
    expect(() => checkKnownOptions({ rate: 1, burst: 2, clock: undefined }, known, 'X options')).not.toThrow();
    expect(() => checkKnownOptions({ rate: 1, extra: undefined }, known, 'X options')).not.toThrow();
  });

  it.each([
    ['brust', 'burst'],
    ['capacty', undefined],
    ['maxkeys', 'maxKeys'],
    ['concurency', 'concurrency'],
    ['clok', 'clock'],
  ])('refuses %s, suggesting %s', (name, suggestion) => {
    let error: unknown;
    try {
      checkKnownOptions({ rate: 1, [name]: 5 }, known, 'X options');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidOptionError);
    const e = error as InvalidOptionError;
    expect(e.code).toBe('ERR_INVALID_OPTION');
    expect(e.option).toBe(name);
    expect(e.value).toBe(5);
    expect(e.message).toContain(`Unknown option \`${name}\` for X options`);
    if (suggestion) expect(e.message).toContain(`did you mean \`${suggestion}\`?`);
    else expect(e.message).not.toContain('did you mean');
    expect(e.message).toContain('known: burst, clock, concurrency, maxKeys, rate');
  });

  it("names a peer's option's equivalent instead of guessing", () => {
    expect(() =>
      checkKnownOptions({ keyGenerator: () => 'k' }, known, 'rateLimit options', {
        keyGenerator: 'write `key` (a function of the request)',
      }),
    ).toThrow(/Unknown option `keyGenerator` for rateLimit options: write `key` \(a function of the request\)/);
  });

  it('ignores inherited and symbol keys', () => {
    const options = Object.assign(Object.create({ inherited: 1 }), { rate: 1, [Symbol('s')]: 2 });
    expect(() => checkKnownOptions(options, known, 'X options')).not.toThrow();
  });
});

describe('closestName', () => {
  it('finds case-only differences, one or two edits, and swaps; nothing for far names', () => {
    expect(closestName('RATE', known)).toBe('rate');
    expect(closestName('bursts', known)).toBe('burst');
    expect(closestName('brust', known)).toBe('burst');
    expect(closestName('xyz', known)).toBeUndefined();
    expect(closestName('ra', known)).toBeUndefined(); // two edits of a two-letter name is a guess
  });
});
