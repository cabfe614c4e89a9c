/**
 * Calling an API without 429s: a loopback server with a hidden limit of 40
 * in any 1 s (a sliding log; a 429 carries `Retry-After: 1`), 16 callers as
 * fast as they can for `BENCH_ADAPTIVE_SECONDS` (default 20) per contender,
 * every contender in the same run, one after the other, each on a fresh
 * server. Figures: the share of answers that were 429, the rate of 200s over
 * the whole run and over its second half, and the callers' p99 latency (a
 * call that waits in a queue counts its wait). The same server with
 * `advertise` sends `RateLimit-Policy`/`RateLimit` on every answer.
 */

import { performance } from 'node:perf_hooks';
import Bottleneck from 'bottleneck';
import PQueue from 'p-queue';
import { Agent, type Dispatcher, interceptors, request } from 'undici';
import { throttleInterceptor } from '../src/index.js';
import { tally, type WindowServer, windowServer } from '../test/http/adaptive-server.js';
import { type Section, table } from './harness.js';

const LIMIT = 40;
const CALLERS = 16;

interface Contender {
  name: string;
  advertise?: boolean;
  /** A call function for `url`, and what to close after. */
  make(url: string): { call: () => Promise<void>; close: () => Promise<void> };
}

function viaDispatcher(compose: (agent: Agent) => Dispatcher): Contender['make'] {
  return (url) => {
    const agent = new Agent({ connections: 64 });
    const dispatcher = compose(agent);
    return {
      call: async () => {
        const response = await request(url, { dispatcher });
        await response.body.text();
      },
      close: () => agent.close(),
    };
  };
}

function viaWrapper(schedule: (fn: () => Promise<void>) => Promise<void>, stop: () => void): Contender['make'] {
  return (url) => {
    const agent = new Agent({ connections: 64 });
    return {
      call: () =>
        schedule(async () => {
          const response = await request(url, { dispatcher: agent });
          await response.body.text();
        }),
      close: async () => {
        stop();
        await agent.close();
      },
    };
  };
}

const contenders: Contender[] = [
  {
    name: 'tokenpace adaptive (limit unknown)',
    make: viaDispatcher((a) => a.compose(throttleInterceptor({ adaptive: true }))),
  },
  {
    name: 'tokenpace adaptive (policy advertised)',
    advertise: true,
    make: viaDispatcher((a) => a.compose(throttleInterceptor({ adaptive: true }))),
  },
  {
    name: 'tokenpace window 40 per 1 s',
    make: viaDispatcher((a) => a.compose(throttleInterceptor({ limit: LIMIT, window: '1s' }))),
  },
  { name: 'tokenpace fixed 40/s', make: viaDispatcher((a) => a.compose(throttleInterceptor({ rate: 40 }))) },
  { name: 'tokenpace fixed 50/s', make: viaDispatcher((a) => a.compose(throttleInterceptor({ rate: 50 }))) },
  {
    name: 'p-queue strict 40 per 1 s',
    make: (url) => {
      const queue = new PQueue({ intervalCap: LIMIT, interval: 1000, strict: true });
      return viaWrapper(
        (fn) => queue.add(fn),
        () => queue.clear(),
      )(url);
    },
  },
  {
    name: 'bottleneck reservoir 40 per 1 s',
    make: (url) => {
      const limiter = new Bottleneck({
        reservoir: LIMIT,
        reservoirRefreshAmount: LIMIT,
        reservoirRefreshInterval: 1000,
      });
      return viaWrapper(
        (fn) => limiter.schedule(fn),
        () => void limiter.stop({ dropWaitingJobs: true }),
      )(url);
    },
  },
  {
    name: 'undici retry interceptor alone',
    make: viaDispatcher((a) =>
      a.compose(interceptors.retry({ maxRetries: 5, statusCodes: [429], methods: ['GET'], minTimeout: 100 })),
    ),
  },
];

function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? Number.NaN;
}

async function runOne(contender: Contender, seconds: number): Promise<string[]> {
  const server: WindowServer = await windowServer({ limit: LIMIT, windowMs: 1000, advertise: contender.advertise });
  const { call, close } = contender.make(server.url);
  const durationMs = seconds * 1000;
  const t0 = performance.now();
  const endAt = t0 + durationMs;
  const latencies: number[] = [];
  const caller = async () => {
    while (performance.now() < endAt) {
      const startedAt = performance.now();
      try {
        await call();
      } catch {
        // a 429 the retry interceptor gave up on, or a cut at the end
      }
      latencies.push(performance.now() - startedAt);
    }
  };
  await Promise.all(Array.from({ length: CALLERS }, caller));
  await close();
  await server.close();
  const all = tally(server.answers, t0, endAt);
  const late = tally(server.answers, t0 + durationMs / 2, endAt);
  return [
    contender.name,
    `${((100 * all.refused) / Math.max(1, all.total)).toFixed(2)} %`,
    `${all.okPerSecond.toFixed(1)}/s (${((100 * all.okPerSecond) / LIMIT).toFixed(0)} %)`,
    `${late.okPerSecond.toFixed(1)}/s (${((100 * late.okPerSecond) / LIMIT).toFixed(0)} %)`,
    `${p99(latencies).toFixed(0)} ms`,
  ];
}

/** tokenpace adaptive against a limit that moves 40 -> 20 -> 60 per 1 s, a phase of `seconds` each. */
async function runMoving(seconds: number): Promise<string[][]> {
  const phases = [40, 20, 60];
  const server = await windowServer({ limit: phases[0] as number, windowMs: 1000 });
  const { call, close } = viaDispatcher((a) => a.compose(throttleInterceptor({ adaptive: true })))(server.url);
  const phaseMs = seconds * 1000;
  const t0 = performance.now();
  const endAt = t0 + phaseMs * phases.length;
  const timers = phases.slice(1).map((limit, i) => setTimeout(() => server.setLimit(limit), phaseMs * (i + 1)));
  const caller = async () => {
    while (performance.now() < endAt) await call().catch(() => undefined);
  };
  await Promise.all(Array.from({ length: CALLERS }, caller));
  for (const timer of timers) clearTimeout(timer);
  await close();
  await server.close();
  return phases.map((limit, i) => {
    const from = t0 + i * phaseMs;
    const all = tally(server.answers, from, from + phaseMs);
    // When the 200s per second first reach 85 % of the new limit (1 s windows).
    let followedS = Number.NaN;
    for (let s = 0; s < seconds; s++) {
      if (tally(server.answers, from + s * 1000, from + (s + 1) * 1000).okPerSecond >= 0.85 * limit) {
        followedS = s + 1;
        break;
      }
    }
    const late = tally(server.answers, from + phaseMs / 2, from + phaseMs);
    return [
      `${limit}/s`,
      `${((100 * all.refused) / Math.max(1, all.total)).toFixed(2)} %`,
      Number.isNaN(followedS) ? 'not within the phase' : `${followedS} s`,
      `${late.okPerSecond.toFixed(1)}/s (${((100 * late.okPerSecond) / limit).toFixed(0)} %)`,
    ];
  });
}

/** The shared quota: 60 per 2 s in fixed windows, of which another client takes 20 at each window's start. */
const SHARED = { limit: 60, windowMs: 2000, other: 20 };

/** `contender` against an origin whose quota another client shares (it goes first in each window). */
async function runShared(name: string, compose: (agent: Agent) => Dispatcher, seconds: number): Promise<string[]> {
  const startMs = performance.now();
  const server = await windowServer({ limit: SHARED.limit, windowMs: SHARED.windowMs, advertise: true, fixed: true });
  const other = new Agent();
  let timer: NodeJS.Timeout | undefined;
  const burst = () => {
    for (let i = 0; i < SHARED.other; i++) {
      request(server.url, { dispatcher: other })
        .then((r) => r.body.text())
        .catch(() => undefined);
    }
    const next = startMs + Math.ceil((performance.now() - startMs + 1) / SHARED.windowMs) * SHARED.windowMs + 5;
    timer = setTimeout(burst, next - performance.now());
  };
  burst();
  const agent = new Agent({ connections: 64 });
  const dispatcher = compose(agent);
  const ours: number[] = [];
  const latencies: number[] = [];
  const endAt = performance.now() + seconds * 1000;
  const caller = async () => {
    while (performance.now() < endAt) {
      const startedAt = performance.now();
      const response = await request(server.url, { dispatcher });
      await response.body.text();
      ours.push(response.statusCode);
      latencies.push(performance.now() - startedAt);
    }
  };
  await Promise.all(Array.from({ length: CALLERS }, caller));
  clearTimeout(timer);
  await Promise.all([agent.close(), other.close()]);
  await server.close();
  const ok = ours.filter((status) => status === 200).length;
  const left = ((SHARED.limit - SHARED.other) * 1000) / SHARED.windowMs;
  return [
    name,
    `${((100 * (ours.length - ok)) / Math.max(1, ours.length)).toFixed(2)} %`,
    `${(ok / seconds).toFixed(1)}/s (${((100 * ok) / seconds / left).toFixed(0)} %)`,
    `${p99(latencies).toFixed(0)} ms`,
  ];
}

export const adaptiveSection: Section = {
  id: 'adaptive',
  title: 'Calling an API without 429s (hidden limit 40 in any 1 s, 16 callers)',
  async run() {
    const seconds = Number(process.env.BENCH_ADAPTIVE_SECONDS ?? 20);
    const rows: string[][] = [];
    for (const contender of contenders) rows.push(await runOne(contender, seconds));
    return [
      table(['contender', '429 share', '200s per second', 'second half', 'p99 latency'], rows),
      '',
      `${seconds} s per contender, each on a fresh server; the limit is 40/s, so 100 % is every call the server allows.`,
      '',
      `tokenpace adaptive, the limit moving 40 -> 20 -> 60 in any 1 s, ${seconds} s each:`,
      '',
      table(['limit', '429 share', 'at 85 % of it after', 'second half'], await runMoving(seconds)),
      '',
      `A quota shared with another client: ${SHARED.limit} per ${SHARED.windowMs / 1000} s in fixed windows, advertised with what is left (\`RateLimit\` r/t); the other client takes ${SHARED.other} at the start of each window, so ${((SHARED.limit - SHARED.other) * 1000) / SHARED.windowMs}/s is left for ours (100 %). ${seconds} s each, 16 callers; the 429 share is of our answers.`,
      '',
      table(
        ['contender', '429 share', '200s per second', 'p99 latency'],
        [
          await runShared(
            'tokenpace adaptive (spends what is left)',
            (a) => a.compose(throttleInterceptor({ adaptive: true })),
            seconds,
          ),
          await runShared(
            `tokenpace window ${SHARED.limit} per ${SHARED.windowMs / 1000} s (the whole quota)`,
            (a) => a.compose(throttleInterceptor({ limit: SHARED.limit, window: SHARED.windowMs })),
            seconds,
          ),
        ],
      ),
    ].join('\n');
  },
};
