/**
 * ThrottleGroup: one bandwidth cap shared by many streams, fairly by bytes
 * (deficit round robin), and a class in a tree of such caps, like Linux HTB.
 *
 * A root group owns one token bucket (rate, burst; it starts full) and one
 * timer (root.ts). A member takes what the buckets on its path hold at once
 * if no one is waiting there; otherwise it joins its class's ring (drr.ts). A
 * subgroup (`group.group(options)`, or `new ThrottleGroup({ parent })`) is a
 * member of its parent that serves members of its own: `weight` scales its
 * share under contention, `guaranteed` is a rate it always gets with demand,
 * and `rate` is its ceiling, never passed (node.ts).
 *
 * Invariants: every class passes at most burst + rate * T in any window of T
 * for each rate on its path, and the root its whole rate while its members
 * have data their caps let them send; an ended or destroyed member, and a
 * destroyed subgroup, leave at once and are not referenced again; other
 * members are never served from inside a member's own write (root.ts).
 * docs/internals/streams.md gives the reasoning, docs/per-tenant-bandwidth.md
 * the classes.
 */

import { type Clock, systemClock } from '../clock.js';
import { checkKnownOptions, InvalidOptionError, InvalidRateError, NotSupportedError } from '../errors.js';
import type { BandwidthParams, BandwidthStore } from '../fleet/bandwidth-store.js';
import {
  type DurationInput,
  describeBytes,
  parseDuration,
  parseRateOption,
  parseSizeOption,
  type RateInput,
  type SizeInput,
} from '../units.js';
import type { ThrottleCounters } from './counters.js';
import { DEFAULT_LEASE_MS, type FleetClass, type FleetGroupState, FleetLink } from './fleet-link.js';
import { checkSum } from './guarantees.js';
import { type GroupHandle, type GroupLink, kJoin, type MemberPort } from './link.js';
import { ClassNode, type ClassNumbers } from './node.js';
import { checkBurst, checkBurstLimit, checkRateLimit, defaultGroupBurstBytes, defaultQuantumBytes } from './pacing.js';
import { Throttle } from './throttle.js';
import {
  checkGuaranteedBelow,
  parseGuaranteed,
  parseWeight,
  type ThrottleOptions,
  type WebThrottleOptions,
} from './throttle-options.js';
import { WebThrottle } from './web-throttle.js';

/** Options for a root {@link ThrottleGroup}. */
export interface ThrottleGroupOptions {
  /** The rate all members share, bytes per second: a number or a string such as `'10MiB/s'`. */
  rate: RateInput;
  /**
   * The shared bucket's capacity, bytes. Must be at least rate x 10 ms.
   * @default rate x 50 ms, at least 1 KiB
   */
  burst?: SizeInput;
  /**
   * The deficit round robin quantum: the bytes a waiting member of weight 1
   * may send per turn. At most half the burst. With the default, a round lasts
   * at most 100 ms: with many members every turn shrinks in proportion (to
   * 1 KiB at the least), so each member is served at least that often.
   * @default rate x 5 ms, at least 1 KiB, at most half the burst and at most a wake piece (see pacing.ts)
   */
  quantum?: SizeInput;
  /** The time source, for the group and every member and subgroup. @default systemClock */
  clock?: Clock;
  /** A root group has no parent; see {@link ThrottleSubgroupOptions}. */
  parent?: undefined;
  /**
   * A fleet bandwidth store (`RedisBandwidthStore`, `MemoryBandwidthStore`): with `key`, the
   * rate and burst are one cap for every group of every process on that store and key
   * (docs/fleets.md). Bytes are leased from the store a lease at a time.
   * @default none: the cap is this process's
   */
  store?: BandwidthStore;
  /** The fleet's key in the store (with `store`). */
  key?: string;
  /**
   * With `store`: how long a lease lasts at this process's share (a busy process calls the store
   * about twice per lease; at most rate x lease leased bytes are unspent at any time). ms or a
   * string such as `'200ms'`.
   * @default '200ms'
   */
  lease?: DurationInput;
}

/** Options for a subgroup: `group.group(options)`, or `new ThrottleGroup({ parent: group, ...options })`. */
export interface ThrottleSubgroupOptions {
  /**
   * The subgroup's own rate, bytes per second: a ceiling (HTB's `ceil`) its
   * members together never pass, however idle the rest of the tree is.
   * @default none: it may take what its parent gives it
   */
  rate?: RateInput;
  /**
   * Its own bucket's capacity, bytes (with a `rate`). At least rate x 10 ms.
   * @default rate x 50 ms, at least 1 KiB
   */
  burst?: SizeInput;
  /**
   * The bytes a member of weight 1 may send per turn within this subgroup.
   * @default its share of its own turn at the parent, so that its members are served once per round of the root
   */
  quantum?: SizeInput;
  /**
   * Its share under contention relative to its siblings (members and
   * subgroups of its parent): the deficit round robin turn scaled by it.
   * @default 1
   */
  weight?: number;
  /**
   * Its guaranteed rate (HTB's `rate`): with demand it gets at least this
   * much, and what it leaves unused goes to its siblings, by weight. The
   * guarantees of a group's members and subgroups add up to at most its rate;
   * a subgroup is guaranteed at least what its own members and subgroups are.
   * @default none
   */
  guaranteed?: RateInput;
  /**
   * On a subgroup of a fleet group (a root with a `store`): the class's name among the fleet's
   * processes, which makes it a fleet class. Its `rate` is then one ceiling for its streams in
   * every process, leased from the store under the fleet group's key as the root's rate is, and
   * its `guaranteed` and `weight` hold among the fleet group's classes across the processes, as
   * in one tree (docs/fleets.md). Give a class the same options in every process.
   * @default none: a subgroup of a fleet group is this process's, with a `weight` only
   */
  key?: string;
}

/** Options for {@link ThrottleGroup.throttle}: a member's own cap, weight and guarantee (all optional) and stream options. */
export type ThrottleMemberOptions = Omit<ThrottleOptions, 'group' | 'clock'>;

/** Options for {@link ThrottleGroup.webThrottle}: as {@link ThrottleMemberOptions}, with the web form's signal and strategies. */
export type WebThrottleMemberOptions = Omit<WebThrottleOptions, 'group' | 'clock'>;

const GROUP_OPTIONS: ReadonlySet<string> = new Set([
  'rate',
  'burst',
  'quantum',
  'clock',
  'parent',
  'weight',
  'guaranteed',
  'store',
  'key',
  'lease',
]);

/**
 * One cap shared fairly by many streams; a class in a tree of caps.
 *
 * @example
 * const server = new ThrottleGroup({ rate: '100MiB/s' });
 * const tenant = server.group({ rate: '10MiB/s', weight: 2 });
 * await Promise.all(urls.map((url) => download(url, tenant.throttle())));
 */
export class ThrottleGroup implements GroupHandle {
  readonly #node: ClassNode;
  readonly #parent: ThrottleGroup | undefined;
  readonly #fleet: FleetLink | undefined;
  /** A fleet class's guarantee and weight as given (its node's are this process's parts of them). */
  #fleetClass: FleetClass | undefined;
  /** A fleet group's classes without a rate of their own: their ceiling follows the fleet's rate and burst. */
  readonly #followers = new Set<ThrottleGroup>();

  constructor(options: ThrottleGroupOptions | (ThrottleSubgroupOptions & { parent: ThrottleGroup })) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError('options', options, 'expected an options object such as { rate: "10MiB/s" }');
    }
    checkKnownOptions(options, GROUP_OPTIONS, 'ThrottleGroup options');
    const parent: unknown = options.parent;
    if (parent === undefined) {
      const root = options as ThrottleGroupOptions;
      if (root.rate === undefined) {
        throw new InvalidRateError(
          undefined,
          'a ThrottleGroup needs a `rate` (bytes per second, e.g. "10MiB/s"), or a `parent` group to be a subgroup of',
        );
      }
      for (const key of ['weight', 'guaranteed'] as const) {
        const value = (options as ThrottleSubgroupOptions)[key];
        if (value !== undefined) {
          throw new InvalidOptionError(key, value, `${key} is a share in a parent group: pass \`parent\` too`);
        }
      }
      const numbers = classNumbers(
        root.rate,
        root.burst,
        parseQuantum(root.quantum),
        false,
        undefined,
        fleetLeaseMs(root),
      );
      const clock = root.clock ?? systemClock;
      this.#parent = undefined;
      this.#fleet = fleetLink(root, numbers, clock);
      this.#node = new ClassNode(this, numbers, undefined, clock, 1, 0, this.#fleet?.meter);
      const fleet = this.#fleet;
      if (fleet !== undefined) {
        fleet.attach(this.#node);
        fleet.onParams = (params) => this.#fleetParams(params);
        this.#node.onDestroyed = () => fleet.close();
        this.#node.memberGuaranteeError = perProcess;
      }
      return;
    }
    if (!(parent instanceof ThrottleGroup)) {
      throw new InvalidOptionError('parent', parent, 'expected `parent` to be a ThrottleGroup');
    }
    const sub = options as ThrottleSubgroupOptions & { clock?: unknown };
    if (sub.clock !== undefined) {
      throw new InvalidOptionError('clock', sub.clock, "a subgroup uses its root's clock: pass `clock` to the root");
    }
    for (const key of ['store', 'lease'] as const) {
      if ((options as ThrottleGroupOptions)[key] !== undefined) {
        throw new InvalidOptionError(
          key,
          (options as ThrottleGroupOptions)[key],
          `${key} applies to a root group only`,
        );
      }
    }
    let root: ThrottleGroup = parent;
    while (root.#parent !== undefined) root = root.#parent;
    const rootFleet = root.#fleet;
    checkFleetClass(sub, rootFleet, parent === root);
    const parentNode = parent.#node;
    const weight = sub.weight === undefined ? 1 : parseWeight(sub.weight);
    const guaranteed = sub.guaranteed === undefined ? 0 : parseGuaranteed(sub.guaranteed);
    if (sub.key === undefined || rootFleet === undefined) {
      const numbers = classNumbers(sub.rate, sub.burst, parseQuantum(sub.quantum), false, parentNode);
      checkGuaranteedBelow(guaranteed, numbers.ratePerSecond ?? parentNode.ceilingPerSecond(), sub.guaranteed);
      const node = new ClassNode(this, numbers, parentNode, parentNode.clock, weight, guaranteed);
      parentNode.adopt(node.port as MemberPort, node);
      this.#fleet = undefined;
      this.#parent = parent;
      this.#node = node;
      return;
    }
    // A fleet class: its rate (the fleet's without one of its own) is leased from its own key,
    // under the fleet group's; its guarantee and weight hold among the fleet group's classes.
    const { leaseMs } = rootFleet;
    const own = classNumbers(sub.rate, sub.burst, parseQuantum(sub.quantum), false, parentNode, leaseMs);
    const numbers =
      own.ratePerSecond === undefined
        ? classNumbers(rootFleet.params.ratePerSecond, rootFleet.params.burst, own.quantumExplicit, true, parentNode)
        : own;
    const ratePerSecond = numbers.ratePerSecond as number;
    checkGuaranteedBelow(guaranteed, ratePerSecond, sub.guaranteed);
    let guarantees = guaranteed;
    for (const c of rootFleet.classes) guarantees += c.guaranteedPerSecond;
    checkSum(guarantees, rootFleet.params.ratePerSecond, 'guaranteed', sub.guaranteed);
    const link = new FleetLink({
      store: rootFleet.store,
      key: `${rootFleet.key}/${sub.key}`,
      leaseMs,
      params: { ratePerSecond, burst: numbers.capacityBytes as number },
      clock: parentNode.clock,
      root: rootFleet,
    });
    const node = new ClassNode(this, numbers, parentNode, parentNode.clock, weight, 0, link.meter);
    link.attach(node);
    link.onParams = (params) => this.#fleetParams(params);
    const fleetClass: FleetClass = { link, node, guaranteedPerSecond: guaranteed, weight };
    if (own.ratePerSecond === undefined) root.#followers.add(this);
    node.onDestroyed = () => {
      rootFleet.classes.delete(fleetClass);
      root.#followers.delete(this);
      link.close();
    };
    parentNode.adopt(node.port as MemberPort, node);
    rootFleet.classes.add(fleetClass);
    this.#fleet = link;
    this.#fleetClass = fleetClass;
    this.#parent = parent;
    this.#node = node;
  }

  /** A new member stream of this group, with an optional cap, weight and guarantee of its own. */
  throttle<Options extends ThrottleMemberOptions = ThrottleMemberOptions>(
    options: Options = {} as Options,
  ): Throttle<Options & ThrottleOptions> {
    return new Throttle({ ...options, group: this });
  }

  /** A new member of this group in the WHATWG form (a `TransformStream`, for `fetch` bodies), as {@link throttle} gives the Node form. */
  webThrottle<Options extends WebThrottleMemberOptions = WebThrottleMemberOptions>(
    options: Options = {} as Options,
  ): WebThrottle<Options & WebThrottleOptions> {
    return new WebThrottle({ ...options, group: this });
  }

  /** A new subgroup of this group: a class with its own ceiling, weight and guarantee (all optional). */
  group(options: ThrottleSubgroupOptions = {}): ThrottleGroup {
    return new ThrottleGroup({ ...options, parent: this });
  }

  /** The rate that bounds this group, bytes per second: its own, or (a subgroup without one) the nearest above it; a fleet group's is the fleet's (its share is `fleet.sharePerSecond`). */
  get rate(): number {
    return this.#fleet?.params.ratePerSecond ?? this.#node.ceilingPerSecond();
  }

  /** The capacity of the bucket that bounds this group, bytes (its own, or the nearest above it). */
  get burst(): number {
    return this.#fleet?.params.burst ?? this.#node.ceilingMeter().burstBytes;
  }

  /** The round-robin quantum of a member of weight 1, bytes (see {@link ThrottleGroupOptions.quantum}). */
  get quantum(): number {
    return this.#node.numbers.quantumBytes;
  }

  /** The group this one is a subgroup of (undefined for a root). */
  get parent(): ThrottleGroup | undefined {
    return this.#parent;
  }

  /** Its weight among its siblings (1 for a root). */
  get weight(): number {
    return this.#fleetClass?.weight ?? this.#node.port?.weight ?? 1;
  }

  /** Its own guaranteed rate, bytes per second (0: none); a fleet class's, fleet-wide. */
  get guaranteed(): number {
    return this.#fleetClass?.guaranteedPerSecond ?? this.#node.guarantees.own;
  }

  /** A fleet group's or a fleet class's link to its store, as the last exchange left it (undefined for any other group). */
  get fleet(): FleetGroupState | undefined {
    return this.#fleet;
  }

  /** Member streams of this group and its subgroups that have neither ended nor been destroyed. */
  get size(): number {
    return this.#node.streams;
  }

  /** Members and subgroups of this group waiting for their turn now. */
  get waiting(): number {
    return this.#node.ring.size;
  }

  /** True once {@link destroy} was called. */
  get destroyed(): boolean {
    return this.#node.destroyed;
  }

  /**
   * This group's progress: bytes passed by all members below it together,
   * the time during which some member held data it could not pass yet, and
   * the group's current and average rate. A fresh snapshot on each read.
   */
  get counters(): ThrottleCounters {
    return this.#node.progress.snapshot(this.#node.clock.now());
  }

  /**
   * Ends every member's writable side, in this group and its subgroups, as
   * `end()` on each: what they hold still passes at the group's rate, then
   * they finish.
   */
  endAll(): void {
    this.#node.endAll();
  }

  /**
   * Destroys every member, in this group and its subgroups, with `error` if
   * given (each emits it, and its pipeline fails with it): their timers are
   * cleared and they leave. The group and its subgroups stay usable.
   */
  destroyAll(error?: Error): void {
    this.#node.destroyAll(error);
  }

  /**
   * Destroys every member below this group (as {@link destroyAll}) and the
   * group itself: a subgroup leaves its parent at once, its share and its
   * guarantee freed. A destroyed group takes no new members or subgroups.
   */
  destroy(error?: Error): void {
    this.#node.destroy(error);
  }

  /**
   * Changes this group's rate from the next piece on; no data is lost. The
   * tokens in the bucket are kept, capped at the new burst (Linux's
   * `tbf_change` refills the bucket instead; we hand out no burst on a
   * change). A default burst and quantum follow the new rate; an explicit
   * burst too small for it throws `BurstTooSmallError`, and a rate below the
   * guarantees it holds throws `InvalidOptionError`; either changes nothing.
   * On a subgroup without a rate of its own, this sets its ceiling. On a
   * fleet group the limits are the store's: this process writes them with its
   * next call, at once, and every process paces by them from its own next
   * call, within one lease.
   */
  setRate(rate: RateInput): void {
    if (this.#perProcess()) throw perProcess();
    const node = this.#node;
    const current = node.numbers;
    const burst = current.burstExplicit ? current.capacityBytes : undefined;
    const leaseMs = this.#fleet?.leaseMs;
    const numbers = classNumbers(rate, burst, current.quantumExplicit, current.burstExplicit, node.parent, leaseMs);
    node.checkRate(numbers.ratePerSecond as number, 'rate', rate);
    // fleet-wide guarantees: a fleet group's classes' together, a fleet class's own
    let guarantees = this.#fleetClass?.guaranteedPerSecond ?? 0;
    if (this.#parent === undefined) for (const c of this.#fleet?.classes ?? []) guarantees += c.guaranteedPerSecond;
    checkSum(guarantees, numbers.ratePerSecond as number, 'rate', rate);
    this.#reconfigure(numbers);
  }

  /**
   * Changes this group's burst from the next piece on; tokens above a smaller
   * burst are dropped. Throws `BurstTooSmallError` (and changes nothing) if it
   * cannot sustain the rate. On a fleet group, fleet-wide (as {@link setRate}).
   */
  setBurst(burst: SizeInput): void {
    if (this.#perProcess()) throw perProcess();
    const node = this.#node;
    const current = node.numbers;
    if (current.ratePerSecond === undefined) {
      throw new InvalidOptionError(
        'burst',
        burst,
        "this subgroup has no rate of its own: call setRate() first, or change its parent's burst",
      );
    }
    this.#reconfigure(classNumbers(current.ratePerSecond, burst, current.quantumExplicit, true, node.parent));
  }

  /** New numbers, checked: a fleet root's go to the store (its bucket paces at its share), a class's to its bucket. */
  #reconfigure(numbers: ClassNumbers): void {
    const fleet = this.#fleet;
    if (fleet === undefined) {
      this.#node.reconfigure(numbers);
      return;
    }
    this.#node.renumber(numbers);
    const params = { ratePerSecond: numbers.ratePerSecond as number, burst: numbers.capacityBytes as number };
    fleet.setParams(params);
    if (this.#parent === undefined) this.#lead(params);
    else this.#root().#followers.delete(this); // a rate of its own now
  }

  /** A fleet group's limits changed: its classes without a rate of their own take them as their ceiling. */
  #lead(params: BandwidthParams): void {
    for (const follower of this.#followers) {
      const link = follower.#fleet as FleetLink;
      if (link.params.ratePerSecond === params.ratePerSecond && link.params.burst === params.burst) continue;
      const { quantumExplicit } = follower.#node.numbers;
      follower.#node.renumber(
        classNumbers(params.ratePerSecond, params.burst, quantumExplicit, true, follower.#node.parent),
      );
      link.setParams(params);
    }
  }

  /** A fleet root's limits changed (here, or in the store by another process): its numbers follow. */
  #fleetParams(params: BandwidthParams): void {
    const current = this.#node.numbers;
    const { quantumExplicit } = current;
    this.#node.renumber({
      ratePerSecond: params.ratePerSecond,
      capacityBytes: params.burst,
      burstExplicit: current.burstExplicit,
      quantumExplicit,
      quantumBytes: quantumExplicit ?? defaultQuantumBytes(params.ratePerSecond, params.burst),
    });
    if (this.#parent === undefined) this.#lead(params);
  }

  /** Changes a subgroup's weight from its next turn on (`InvalidOptionError` for a root, or a weight not above 0). */
  setWeight(weight: number): void {
    const node = this.#subgroup('weight', weight);
    const fleetClass = this.#fleetClass;
    if (fleetClass === undefined) {
      node.setShare(parseWeight(weight), node.guarantees.own);
      return;
    }
    fleetClass.weight = parseWeight(weight);
    this.#root().#fleet?.applyClasses();
  }

  /**
   * Changes a subgroup's guaranteed rate (0: none) from its next turn on.
   * Throws `InvalidOptionError`, changing nothing, if the guarantees sharing a
   * rate above it would add up to more than that rate.
   */
  setGuaranteed(guaranteed: RateInput): void {
    const node = this.#subgroup('guaranteed', guaranteed);
    const fleetClass = this.#fleetClass;
    if (fleetClass === undefined) {
      node.setShare(node.port?.weight ?? 1, parseGuaranteed(guaranteed));
      return;
    }
    const rootFleet = this.#root().#fleet as FleetLink;
    const perSecond = parseGuaranteed(guaranteed);
    checkGuaranteedBelow(perSecond, (this.#fleet as FleetLink).params.ratePerSecond, guaranteed);
    let sum = perSecond;
    for (const c of rootFleet.classes) if (c !== fleetClass) sum += c.guaranteedPerSecond;
    checkSum(sum, rootFleet.params.ratePerSecond, 'guaranteed', guaranteed);
    fleetClass.guaranteedPerSecond = perSecond;
    rootFleet.applyClasses();
  }

  #subgroup(option: string, value: unknown): ClassNode {
    if (this.#parent === undefined) {
      throw new InvalidOptionError(option, value, `${option} is a share in a parent group: a root group has none`);
    }
    if (option === 'guaranteed' && this.#perProcess()) throw perProcess();
    return this.#node;
  }

  /** A class of a fleet group that is not a fleet class: its own rate or guarantee would hold per process. */
  #perProcess(): boolean {
    return this.#fleet === undefined && this.#root().#fleet !== undefined;
  }

  #root(): ThrottleGroup {
    let root: ThrottleGroup = this;
    while (root.#parent !== undefined) root = root.#parent;
    return root;
  }

  /** @internal A new member hands over its port. */
  [kJoin](port: MemberPort): GroupLink {
    this.#node.adopt(port);
    return this.#node.link;
  }
}

/** The refusal of a limit that, in a fleet group, would hold in each process rather than for the fleet. */
function perProcess(): NotSupportedError {
  return new NotSupportedError(
    "a `rate` or `guaranteed` in a fleet group holds fleet-wide only on a fleet class, a subgroup of the fleet group with a `key` (its name in the store); a member's `guaranteed` would hold per process: give the subgroup a `key`, or a `weight` only, and put a stream that needs a guarantee in a fleet class",
  );
}

/** Checks a subgroup's fleet options: `key` only on a subgroup of a fleet group itself; a `rate` or `guaranteed` without it is refused there. */
function checkFleetClass(sub: ThrottleSubgroupOptions, rootFleet: FleetLink | undefined, ofRoot: boolean): void {
  const { key } = sub;
  if (key !== undefined) {
    if (rootFleet === undefined || !ofRoot) {
      throw new InvalidOptionError(
        'key',
        key,
        'a subgroup takes a `key` as a class of a fleet group (a root with a `store`), directly below it',
      );
    }
    if (typeof key !== 'string' || key.length === 0) {
      throw new InvalidOptionError(
        'key',
        key,
        "expected a fleet class's `key` to be a non-empty string, as in `key: 'tenant-a'`",
      );
    }
  }
  if (rootFleet !== undefined && key === undefined && (sub.rate !== undefined || sub.guaranteed !== undefined)) {
    throw perProcess();
  }
}

/** The link to a fleet store for a root group with `store` (checked: `key` too, a lease of at least 10 ms), else undefined. */
function fleetLink(options: ThrottleGroupOptions, numbers: ClassNumbers, clock: Clock): FleetLink | undefined {
  const { store, key, lease } = options;
  if (store === undefined) {
    for (const [name, value] of [
      ['key', key],
      ['lease', lease],
    ] as const) {
      if (value !== undefined)
        throw new InvalidOptionError(name, value, `${name} applies to a fleet group: pass \`store\` too`);
    }
    return undefined;
  }
  if (typeof store !== 'object' || store === null || typeof (store as BandwidthStore).exchange !== 'function') {
    throw new InvalidOptionError(
      'store',
      store,
      'expected `store` to be a bandwidth store such as a RedisBandwidthStore',
    );
  }
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidOptionError(
      'key',
      key,
      "a fleet group needs a `key`: the name its processes share, as in `key: 'egress'`",
    );
  }
  const leaseMs = fleetLeaseMs(options) as number;
  const params = { ratePerSecond: numbers.ratePerSecond as number, burst: numbers.capacityBytes as number };
  return new FleetLink({ store, key, leaseMs, params, clock });
}

/** A fleet group's lease, ms (checked: 10 ms to 60 s); undefined without a store. */
function fleetLeaseMs(options: ThrottleGroupOptions): number | undefined {
  const { store, lease } = options;
  if (store === undefined) return undefined;
  const leaseMs = lease === undefined ? DEFAULT_LEASE_MS : typeof lease === 'number' ? lease : parseDuration(lease);
  if (!(leaseMs >= 10 && leaseMs <= 60_000)) {
    throw new InvalidOptionError('lease', lease, "expected `lease` between 10 ms and 60 s, as in `lease: '200ms'`");
  }
  return leaseMs;
}

function parseQuantum(quantum: SizeInput | undefined): number | undefined {
  return quantum === undefined ? undefined : parseSizeOption(quantum, 'quantum');
}

/**
 * A class's numbers from its options: rate (required for a root), burst and
 * quantum, parsed and checked (`BurstTooSmallError`, and a quantum at most
 * half the burst). A subgroup without a rate of its own takes its quantum's
 * default from the rate above it.
 */
function classNumbers(
  rate: RateInput | undefined,
  burst: SizeInput | undefined,
  quantumExplicit: number | undefined,
  burstExplicit: boolean,
  parent: ClassNode | undefined,
  leaseMs?: number,
): ClassNumbers {
  let ratePerSecond: number | undefined;
  let capacityBytes: number | undefined;
  if (rate !== undefined) {
    ratePerSecond = parseRateOption(rate, 'rate');
    checkRateLimit(ratePerSecond, rate);
    if (burst === undefined) {
      capacityBytes = defaultGroupBurstBytes(ratePerSecond);
      // A fleet's bucket holds the leases it hands out (one lease of the rate) and as much again,
      // so that a member back from idle, or one whose share grew, finds its lease there.
      if (leaseMs !== undefined)
        capacityBytes = Math.max(capacityBytes, Math.ceil((2 * ratePerSecond * leaseMs) / 1000));
    } else {
      capacityBytes = parseSizeOption(burst, 'burst');
      checkBurstLimit(capacityBytes, burst);
    }
    checkBurst(ratePerSecond, capacityBytes);
  } else if (burst !== undefined) {
    throw new InvalidOptionError('burst', burst, "burst applies to a subgroup's own rate: set `rate` too");
  }
  const boundRate = ratePerSecond ?? (parent as ClassNode).ceilingPerSecond();
  const boundCapacity = capacityBytes ?? (parent as ClassNode).ceilingMeter().burstBytes;
  return {
    ratePerSecond,
    capacityBytes,
    burstExplicit: burstExplicit || burst !== undefined,
    quantumExplicit: quantumExplicit === undefined ? undefined : checkQuantum(quantumExplicit, boundCapacity),
    quantumBytes: quantumExplicit ?? defaultQuantumBytes(boundRate, boundCapacity),
  };
}

function checkQuantum(explicit: number, capacityBytes: number): number {
  if (explicit > capacityBytes / 2) {
    throw new InvalidOptionError(
      'quantum',
      explicit,
      `quantum ${describeBytes(explicit)} must be at most half the burst (${describeBytes(capacityBytes / 2)}): ` +
        'the group waits for a quantum-sized piece, and a late timer must not overflow the bucket; lower quantum or raise burst',
    );
  }
  return explicit;
}
