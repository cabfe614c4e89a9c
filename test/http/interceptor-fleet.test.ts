/**
 * The interceptor's `bandwidth` takes a fleet group: two clients (two groups on one store, as two
 * processes would be) share one rate for their response bodies, against a real loopback server.
 */

import { Agent, type Dispatcher, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBandwidthStore } from '../../src/fleet/bandwidth-store.js';
import { throttleInterceptor } from '../../src/http/interceptor.js';
import { ThrottleGroup } from '../../src/stream/group.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { listen } from './support.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const settle = (ms = 5) => new Promise((resolve) => setTimeout(resolve, ms));

describe('throttleInterceptor: a fleet group as bandwidth', () => {
  it('two clients on one store share the fleet rate, every byte delivered', async () => {
    const fake = fakeClock(1_000_000);
    const size = 512 * 1024;
    const payload = Buffer.alloc(size, 7);
    const s = await listen((_req, res) => {
      res.writeHead(200, { 'content-length': String(size) });
      res.end(payload);
    });
    cleanups.push(() => s.close());
    const store = new MemoryBandwidthStore({ clock: fake.clock });
    const rate = 256 * 1024;
    const groups = [0, 1].map(() => new ThrottleGroup({ rate, store, key: 'egress', clock: fake.clock }));
    const clients: Dispatcher[] = groups.map((group) => {
      const agent = new Agent({ connections: 4 });
      cleanups.push(() => agent.close());
      return agent.compose(throttleInterceptor({ clock: fake.clock, bandwidth: group }));
    });
    const received = [0, 0];
    const reading = clients.map(async (dispatcher, i) => {
      const response = await request(s.url, { dispatcher });
      for await (const chunk of response.body) received[i] = (received[i] as number) + (chunk as Buffer).length;
    });
    const startMs = fake.clock.now();
    // the fleet's burst (2 leases of the rate) and the leases held unspent (one lease of the rate)
    const allowance = (3 * rate * 200) / 1000;
    while ((received[0] as number) + (received[1] as number) < 2 * size) {
      fake.timers.tick(10);
      await settle(2);
      const total = (received[0] as number) + (received[1] as number);
      expect(total).toBeLessThanOrEqual(allowance + ((fake.clock.now() - startMs) / 1000) * rate);
    }
    await Promise.all(reading);
    expect(received).toEqual([size, size]);
    // 1 MiB at 256 KiB/s: about 4 s of the fake clock, less what the allowance let through at once
    expect(fake.clock.now() - startMs).toBeGreaterThanOrEqual(((2 * size - allowance) / rate) * 1000);
    for (const g of groups) g.destroy();
  }, 60_000);
});
