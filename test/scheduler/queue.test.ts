import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Level, type Waiter, WaitQueue } from '../../src/scheduler/queue.js';

class Node implements Waiter<Node> {
  level: Level<Node> | undefined;
  slot = 0;
  constructor(
    readonly id: string,
    readonly priority: number,
    readonly cost: number,
    readonly enqueuedAtMs: number,
  ) {}
}

function fill(specs: [id: string, priority: number, cost: number][]): {
  queue: WaitQueue<Node>;
  nodes: Map<string, Node>;
} {
  const queue = new WaitQueue<Node>();
  const nodes = new Map<string, Node>();
  specs.forEach(([id, priority, cost], i) => {
    const node = new Node(id, priority, cost, i);
    nodes.set(id, node);
    queue.push(node);
  });
  return { queue, nodes };
}

const ids = (queue: WaitQueue<Node>): string[] => [...queue].map((n) => n.id);

describe('WaitQueue', () => {
  it('runs higher priorities first and is FIFO within a priority', () => {
    const { queue } = fill([
      ['a', 0, 1],
      ['b', 5, 1],
      ['c', 0, 1],
      ['d', -1, 1],
      ['e', 5, 1],
      ['f', 2, 1],
    ]);
    expect(ids(queue)).toEqual(['b', 'e', 'f', 'a', 'c', 'd']);
    expect(queue.size).toBe(6);
    const order: string[] = [];
    for (let n = queue.shift(); n; n = queue.shift()) order.push(n.id);
    expect(order).toEqual(['b', 'e', 'f', 'a', 'c', 'd']);
    expect(queue.size).toBe(0);
    expect(queue.peek()).toBeUndefined();
    expect(queue.shift()).toBeUndefined();
  });

  it('removes any node at once, and a removed node twice is a no-op', () => {
    const { queue, nodes } = fill([
      ['a', 0, 1],
      ['b', 0, 2],
      ['c', 0, 3],
      ['d', 1, 4],
    ]);
    const b = nodes.get('b') as Node;
    expect(queue.remove(b)).toBe(true);
    expect(queue.remove(b)).toBe(false);
    expect(ids(queue)).toEqual(['d', 'a', 'c']);
    expect(queue.remove(nodes.get('d') as Node)).toBe(true); // the whole level goes
    expect(queue.remove(nodes.get('c') as Node)).toBe(true); // a tail
    expect(ids(queue)).toEqual(['a']);
    expect(queue.size).toBe(1);
    expect(queue.costAtOrAbove(0)).toBe(1);
  });

  it('sums the cost at or above a priority: what a new job waits behind', () => {
    const { queue } = fill([
      ['a', 0, 1],
      ['b', 5, 2],
      ['c', 0, 3],
      ['d', -1, 4],
    ]);
    expect(queue.costAtOrAbove(10)).toBe(0);
    expect(queue.costAtOrAbove(5)).toBe(2);
    expect(queue.costAtOrAbove(1)).toBe(2);
    expect(queue.costAtOrAbove(0)).toBe(6);
    expect(queue.costAtOrAbove(-1)).toBe(10);
    expect(queue.sizeAt(0)).toBe(2);
    expect(queue.sizeAt(3)).toBe(0);
  });

  it('made without arrivals, keeps the priority order and removal, and no links in arrival order', () => {
    const queue = new WaitQueue<Node>({ arrivals: false });
    const nodes = ['a', 'b', 'c', 'd'].map((id, i) => new Node(id, i % 2, 1, i));
    for (const node of nodes) queue.push(node);
    queue.remove(nodes[3] as Node);
    expect([...queue].map((n) => n.id)).toEqual(['b', 'a', 'c']);
    expect(queue.oldest()).toBeUndefined();
    for (const node of nodes) expect(Object.hasOwn(node, 'older') || Object.hasOwn(node, 'newer')).toBe(false);
    expect([queue.shift()?.id, queue.shift()?.id, queue.shift()?.id, queue.size]).toEqual(['b', 'a', 'c', 0]);
  });

  it('finds the oldest waiter across priorities', () => {
    const { queue, nodes } = fill([
      ['a', 0, 1],
      ['b', 5, 1],
      ['c', 0, 1],
    ]);
    expect(queue.oldest()?.id).toBe('a');
    queue.remove(nodes.get('a') as Node);
    expect(queue.oldest()?.id).toBe('b');
    queue.remove(nodes.get('b') as Node);
    expect(queue.oldest()?.id).toBe('c');
    queue.remove(nodes.get('c') as Node);
    expect(queue.oldest()).toBeUndefined();
  });

  it('gives up the oldest of the lowest priority first, and with `skip` the first not exempted, going up', () => {
    const { queue, nodes } = fill([
      ['a', 0, 1],
      ['b', 5, 1],
      ['c', 0, 1],
      ['d', -1, 1],
      ['e', 2, 1],
    ]);
    expect(queue.lowest()?.id).toBe('d');
    expect(queue.lowest((n) => n.id === 'd')?.id).toBe('a');
    expect(queue.lowest((n) => ['d', 'a'].includes(n.id))?.id).toBe('c');
    expect(queue.lowest((n) => n.id !== 'b')?.id).toBe('b');
    expect(queue.lowest(() => true)).toBeUndefined();
    // the order `skip` goes in is the queue's order backwards, level by level, oldest first in each
    const order = [...queue].reverse().map((n) => n.priority);
    expect(order).toEqual([-1, 0, 0, 2, 5]);
    queue.remove(nodes.get('a') as Node);
    expect(queue.lowest((n) => n.id === 'd')?.id).toBe('c');
  });

  it('can be iterated while nodes are removed', () => {
    const { queue } = fill([
      ['a', 0, 1],
      ['b', 1, 1],
      ['c', 0, 1],
    ]);
    for (const node of queue) queue.remove(node);
    expect(queue.size).toBe(0);
  });

  type ModelOp =
    | { kind: 'push'; priority: number; cost: number }
    | { kind: 'remove'; pick: number }
    | { kind: 'shift' };

  /** Runs `ops` on `queue` and on a plain array (arrival order), checking them against each other after every step. */
  function againstModel(
    queue: WaitQueue<Node>,
    ops: readonly ModelOp[],
    arrivals: boolean,
    each: (model: Node[]) => void = () => {},
  ): Node[] {
    let model: Node[] = [];
    let t = 0;
    const runOrder = () =>
      [...model].sort((a, b) => b.priority - a.priority || a.enqueuedAtMs - b.enqueuedAtMs).map((n) => n.id);
    for (const o of ops) {
      if (o.kind === 'push') {
        const node = new Node(`n${t}`, o.priority, o.cost, t++);
        queue.push(node);
        model.push(node);
      } else if (o.kind === 'remove' && model.length) {
        const node = model[o.pick % model.length] as Node;
        expect(queue.remove(node)).toBe(true);
        expect(queue.remove(node)).toBe(false);
        model = model.filter((n) => n !== node);
      } else if (o.kind === 'shift') {
        const expected = runOrder()[0];
        expect(queue.shift()?.id).toBe(expected);
        model = model.filter((n) => n.id !== expected);
      }
      expect(queue.size).toBe(model.length);
      expect(queue.peek()?.id).toBe(runOrder()[0]);
      if (arrivals) expect(queue.oldest()?.id).toBe(model[0]?.id);
      each(model);
    }
    expect(ids(queue)).toEqual(runOrder());
    return model;
  }

  const removeOrShift = [
    fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }),
    fc.record({ kind: fc.constant('shift' as const) }),
  ];

  it('matches a plain model when a level holds hundreds and loses them from the middle (its array is rebuilt)', () => {
    const push = fc.record({
      kind: fc.constant('push' as const),
      priority: fc.integer({ min: 0, max: 1 }),
      cost: fc.constant(1),
    });
    const op = fc.oneof(
      { weight: 3, arbitrary: push },
      ...removeOrShift.map((arbitrary) => ({ weight: 1, arbitrary })),
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 200, maxLength: 1500 }), fc.boolean(), (ops, arrivals) => {
        const queue = new WaitQueue<Node>({ arrivals });
        const model = againstModel(queue, ops, arrivals);
        expect(queue.sizeAt(0) + queue.sizeAt(1)).toBe(model.length);
      }),
      { numRuns: 60 },
    );
  }, 30_000); // a property over hundreds of jobs a level: a few seconds when the machine is loaded

  it('matches a plain model under any sequence of pushes, removals and shifts (many distinct priorities)', () => {
    const push = fc.record({
      kind: fc.constant('push' as const),
      priority: fc.integer({ min: -20, max: 20 }),
      cost: fc.integer({ min: 0, max: 5 }),
    });
    fc.assert(
      fc.property(fc.array(fc.oneof(push, ...removeOrShift), { maxLength: 200 }), (ops) => {
        const queue = new WaitQueue<Node>();
        const model = againstModel(queue, ops, true, (now) => {
          for (const p of [-21, -5, 0, 7, 21]) {
            expect(queue.costAtOrAbove(p)).toBe(now.filter((n) => n.priority >= p).reduce((a, n) => a + n.cost, 0));
          }
        });
        for (const p of [-3, 0, 3]) expect(queue.sizeAt(p)).toBe(model.filter((n) => n.priority === p).length);
      }),
      { numRuns: 300 },
    );
  });

  it('40,000 distinct priorities in arrival order (a deadline as the priority) drain in priority order', () => {
    const queue = new WaitQueue<Node>();
    for (let i = 0; i < 40_000; i++) queue.push(new Node(`n${i}`, i, 1, i));
    expect(queue.costAtOrAbove(30_000)).toBe(10_000);
    let expected = 39_999;
    for (let n = queue.shift(); n; n = queue.shift()) {
      expect(n.priority).toBe(expected--);
      if (expected % 10_000 === 0) expect(queue.oldest()?.priority).toBe(0);
    }
    expect(expected).toBe(-1);
  });
});
