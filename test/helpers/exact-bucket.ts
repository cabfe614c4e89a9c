/**
 * An exact model of the token bucket, in rational arithmetic (BigInt
 * fractions): the semantics of src/meters/bucket.ts with no rounding at all,
 * for property tests to hold the floating-point code against.
 */

/** A rational number n / d, d > 0, in lowest terms. */
export class Q {
  readonly n: bigint;
  readonly d: bigint;
  constructor(n: bigint, d = 1n) {
    if (d < 0n) {
      n = -n;
      d = -d;
    }
    const g = gcd(n < 0n ? -n : n, d) || 1n;
    this.n = n / g;
    this.d = d / g;
  }
  /** An integer or a decimal with up to 6 places, exactly. */
  static of(x: number): Q {
    if (Number.isInteger(x)) return new Q(BigInt(x));
    return new Q(BigInt(Math.round(x * 1e6)), 1_000_000n);
  }
  add(o: Q): Q {
    return new Q(this.n * o.d + o.n * this.d, this.d * o.d);
  }
  sub(o: Q): Q {
    return new Q(this.n * o.d - o.n * this.d, this.d * o.d);
  }
  mul(o: Q): Q {
    return new Q(this.n * o.n, this.d * o.d);
  }
  div(o: Q): Q {
    return new Q(this.n * o.d, this.d * o.n);
  }
  cmp(o: Q): number {
    const l = this.n * o.d;
    const r = o.n * this.d;
    return l < r ? -1 : l > r ? 1 : 0;
  }
  lt(o: Q): boolean {
    return this.cmp(o) < 0;
  }
  le(o: Q): boolean {
    return this.cmp(o) <= 0;
  }
  toNumber(): number {
    return Number(this.n) / Number(this.d);
  }
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

const ZERO = new Q(0n);
const THOUSAND = new Q(1000n);
const min = (a: Q, b: Q): Q => (a.lt(b) ? a : b);
const max = (a: Q, b: Q): Q => (a.lt(b) ? b : a);

/** The bucket, exactly: tokens and time as rationals, rate in tokens per second. */
export class ExactBucket {
  tokens: Q;
  atMs: Q;
  rate: Q;
  capacity: Q;
  constructor(ratePerSecond: number, capacity: number, nowMs: number) {
    this.rate = Q.of(ratePerSecond);
    this.capacity = Q.of(capacity);
    this.tokens = this.capacity;
    this.atMs = Q.of(nowMs);
  }
  tokensAt(t: Q): Q {
    if (t.le(this.atMs)) return this.tokens;
    return min(this.capacity, this.tokens.add(t.sub(this.atMs).mul(this.rate).div(THOUSAND)));
  }
  #advance(t: Q): void {
    this.tokens = this.tokensAt(t);
    this.atMs = max(this.atMs, t);
  }
  readyAt(cost: Q): Q {
    if (cost.le(this.tokens)) return this.atMs;
    return this.atMs.add(cost.sub(this.tokens).mul(THOUSAND).div(this.rate));
  }
  delayFrom(t: Q, cost: Q): Q {
    if (cost.le(this.tokensAt(t))) return ZERO;
    return this.readyAt(cost).sub(t);
  }
  /** A reservation: the instant it may act, or undefined if that is more than maxWaitMs away (charged nothing). */
  reserve(t: Q, cost: Q, maxWaitMs?: Q): Q | undefined {
    const delay = this.delayFrom(t, cost);
    if (maxWaitMs?.lt(delay)) return undefined;
    this.tokens = this.tokensAt(t).sub(cost);
    this.atMs = max(this.atMs, t);
    return t.add(delay);
  }
  tryTake(t: Q, cost: Q): boolean {
    if (this.tokensAt(t).lt(cost)) return false;
    this.reserve(t, cost);
    return true;
  }
  /** x/time's CancelAt, as bucket.ts states it. Returns the tokens given back. */
  refund(t: Q, cost: Q, readyAtMs: Q): Q {
    if (readyAtMs.lt(t)) return ZERO;
    const debt = ZERO.sub(this.tokensAt(readyAtMs));
    const back = ZERO.lt(debt) ? cost.sub(debt) : cost;
    if (back.le(ZERO)) return ZERO;
    this.#advance(t);
    const before = this.tokens;
    this.tokens = min(this.capacity, this.tokens.add(back));
    return this.tokens.sub(before);
  }
  reconfigure(t: Q, ratePerSecond: number, capacity: number): void {
    this.#advance(t);
    this.rate = Q.of(ratePerSecond);
    this.capacity = Q.of(capacity);
    this.tokens = min(this.tokens, this.capacity);
  }
}
