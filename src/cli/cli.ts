/**
 * The `tokenpace` command: `explain`, `simulate` and `pipe`.
 *
 * `run(argv, io)` parses the arguments, runs one command and returns the exit
 * code: 0 done, 1 failed (a file that cannot be read, a write that failed),
 * 2 called wrongly (the message and the command's usage go to stderr).
 */

import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { isTokenpaceError } from '../errors.js';
import type { FailurePolicy } from '../stores/health.js';
import { formatRate } from '../units.js';
import {
  byteRateFlag,
  byteSizeFlag,
  integerFlag,
  type Parsed,
  parseFlags,
  rateFlag,
  sizeFlag,
  stringFlag,
} from './args.js';
import { explain, formatExplanation } from './explain.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type Io, UsageError } from './io.js';
import { runPipe } from './pipe.js';
import { renderHtml, renderSvg } from './plot.js';
import { formatChart, formatHeader, formatLookAt, formatSummary, formatTable } from './report.js';
import { parseCsvTrace, SCENARIOS, type ScenarioName, scenario, type Trace } from './scenarios.js';
import { ALGORITHMS, type Algorithm, simulate } from './simulate.js';

const MAIN_USAGE = `Usage: tokenpace <command> [options]

Commands:
  explain    what a rate and burst allow, in plain words
  simulate   replay traffic through the limiters on a virtual clock, side by side
  pipe       copy stdin (or a file) to stdout at a capped rate, like pv -L

Options:
  -h, --help     show help (also: tokenpace <command> --help)
  -v, --version  show the version

Examples:
  tokenpace explain --rate 100/s --burst 200
  tokenpace simulate --rate 100/s --burst 200 --scenario campaign --compare all
  tokenpace pipe --rate 1MiB/s < big.iso > copy.iso
`;

const EXPLAIN_USAGE = `Usage: tokenpace explain --rate RATE --burst SIZE [--instances N] [--calls N,N,...] [--json]

Explains a token bucket: the sustained rate, the largest burst, the time to
refill from empty, the most admitted in windows of 1 s, 10 s and 1 min, what
N independent instances add up to, and whether timers can sustain the rate.

Options:
  --rate RATE       refill rate: 100/s, 6000/min, 10MiB/s, 8mbit (required)
  --burst SIZE      bucket capacity: 200, 64KiB (required)
  --instances N     how many instances each keep a bucket like this (default 1)
  --calls N,N,...   groups of quick calls to run back to back from a full bucket
  --json            print the numbers as JSON
  -h, --help        show this help
`;

const SIMULATE_USAGE = `Usage: tokenpace simulate --rate RATE --burst SIZE --scenario NAME|FILE.csv
                         [--compare all|LIST] [--svg FILE] [--html FILE] [--json]

Replays a traffic trace through the real limiter code on a virtual clock (no
real waiting) and prints, per second, what was offered, let through,
rejected, queued, and the longest wait; then a chart and a summary.

Options:
  --rate RATE        the limit: 100/s, 6000/min; from 1/s to 10000/s (required)
  --burst SIZE       the token bucket's capacity; also the leaky bucket's size (required)
  --scenario NAME    ${SCENARIOS.join(', ')}, or a CSV file: one column of arrival
                     times in seconds, or two columns "second,count" (required)
  --compare LIST     all, or a comma-separated list of:
                     ${ALGORITHMS.join(', ')}
                     (default: token-bucket alone)
  --variant N        which pseudo-random spread of arrivals within each second
                     (default 1; the same N always gives the same trace)
  --svg FILE         write the plot as SVG
  --html FILE        write the plot and summary as an HTML page
  --json             print the results as JSON instead of tables
  -h, --help         show this help
`;

const PIPE_USAGE = `Usage: tokenpace pipe --rate RATE [--burst SIZE] [--peak-rate RATE] [FILE]
       tokenpace pipe --rate RATE --redis URL --key NAME [--on-error POLICY] [FILE]

Copies FILE (or stdin) to stdout at RATE bytes per second, like pv -L. A
progress bar (bytes, rate, elapsed time, and the ETA for a file) is drawn on
stderr when it is a terminal.

Options:
  --rate RATE        the cap: 1MiB/s, 500kB/s, 8mbit, or pv's 10m (required)
  --burst SIZE       how much may pass at once after a pause: 64KiB, or pv's 64k
                     (default 100 ms of the rate, at least 128 KiB if that is at
                     most 250 ms of it)
  --peak-rate RATE   how fast a burst itself may drain (above --rate)
  --redis URL        share the rate with every pipe on the same Redis and --key,
                     on any host: one cap for all (bytes leased from Redis)
  --key NAME         the name of the shared cap (with --redis)
  --on-error POLICY  when Redis fails: deny (stop until it is back; the
                     default), allow (each pipe at the whole rate) or local
                     (each at rate / --workers N)
  -h, --help         show this help

Units: B, kB/MB/GB (powers of 1000), KiB/MiB/GiB (powers of 1024), kbit/mbit
(bits); a rate is per second unless it names another period (/min, /h). As in
pv, a number with just k, m, g or t (either case) counts KiB, MiB, GiB, TiB:
--rate 10m is 10 MiB/s. Only pipe reads this short form; the other commands
refuse 10m as ambiguous (10 per minute? 10 megabits?).
`;

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function parseCompare(text: string | undefined): Algorithm[] {
  if (text === undefined) return ['token-bucket'];
  if (text === 'all') return [...ALGORITHMS];
  const names = text.split(',').map((s) => s.trim());
  const known = new Set<string>(ALGORITHMS);
  const aliases: Record<string, Algorithm> = {
    'unbounded-queue': 'queue',
    token: 'token-bucket',
    leaky: 'leaky-bucket',
  };
  const out: Algorithm[] = [];
  for (const name of names) {
    const algorithm = known.has(name) ? (name as Algorithm) : aliases[name];
    if (algorithm === undefined) {
      throw new UsageError(
        `--compare: unknown algorithm ${JSON.stringify(name)}: use all or any of ${ALGORITHMS.join(', ')}`,
      );
    }
    if (!out.includes(algorithm)) out.push(algorithm);
  }
  return out;
}

function parseCalls(text: string | undefined): number[] | undefined {
  if (text === undefined) return undefined;
  const parts = text.split(',').map((s) => s.trim());
  const calls = parts.map(Number);
  if (parts.length > 100 || calls.some((n, i) => !/^[0-9]+$/.test(parts[i] ?? '') || n < 1 || n > 1_000_000)) {
    throw new UsageError(
      `--calls: invalid value ${JSON.stringify(text)}: expected whole numbers from 1 to 1000000, like 30,30`,
    );
  }
  return calls;
}

async function explainCommand(p: Parsed, io: Io): Promise<number> {
  const ratePerSecond = rateFlag(p, 'rate', true);
  const burst = sizeFlag(p, 'burst', true);
  const instances = integerFlag(p, 'instances', 1, 1_000_000) ?? 1;
  const calls = parseCalls(stringFlag(p, 'calls'));
  // A rate in bytes or bits (10MiB/s, 8mbit, 100Mbps) explains bytes; a plain count explains requests.
  const unit = /B|bit|bps/i.test(stringFlag(p, 'rate', true).replace(/\bper\b/gi, '')) ? 'bytes' : 'requests';
  const e = explain(ratePerSecond, burst, instances, calls, unit);
  io.stdout.write(p.values.json ? `${JSON.stringify(e, null, 2)}\n` : formatExplanation(e));
  return EXIT_OK;
}

async function loadTrace(name: string, ratePerSecond: number, variant: number): Promise<Trace> {
  if ((SCENARIOS as readonly string[]).includes(name)) return scenario(name as ScenarioName, ratePerSecond, variant);
  if (!/\.(csv|txt)$/i.test(name) && !name.includes('/')) {
    throw new UsageError(
      `--scenario: unknown scenario ${JSON.stringify(name)}: use ${SCENARIOS.join(', ')} or a .csv file`,
    );
  }
  let text: string;
  try {
    text = await readFile(name, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(
      `--scenario: cannot read ${name}: ${code === 'ENOENT' ? 'no such file' : (error as Error).message}`,
    );
  }
  return parseCsvTrace(text, name, variant);
}

async function simulateCommand(p: Parsed, io: Io): Promise<number> {
  const ratePerSecond = rateFlag(p, 'rate', true);
  const burst = sizeFlag(p, 'burst', true);
  const scenarioName = stringFlag(p, 'scenario', true);
  const algorithms = parseCompare(stringFlag(p, 'compare'));
  const variant = integerFlag(p, 'variant', 0, 2 ** 32 - 1) ?? 1;
  const svg = stringFlag(p, 'svg');
  const html = stringFlag(p, 'html');
  if (ratePerSecond < 1 || ratePerSecond > 10_000) {
    throw new UsageError(
      `--rate: the simulator takes rates from 1/s to 10000/s (requests per second), got ${formatRate(ratePerSecond)}`,
    );
  }
  const trace = await loadTrace(scenarioName, ratePerSecond, variant);
  if (trace.arrivalsMs.length > 2_000_000)
    throw new UsageError('--scenario: more than 2 million requests; use a shorter trace');
  const sim = await simulate(trace, ratePerSecond, burst, algorithms);
  if (p.values.json) {
    io.stdout.write(`${JSON.stringify({ simulatedTime: true, ...sim }, null, 2)}\n`);
  } else {
    const width = Math.max(60, Math.min(160, io.columns ?? 100));
    io.stdout.write(
      [formatHeader(sim), formatTable(sim), formatChart(sim, width), formatSummary(sim), formatLookAt(sim)].join('\n'),
    );
  }
  try {
    if (svg !== undefined) {
      await writeFile(svg, renderSvg(sim));
      io.stderr.write(`tokenpace simulate: wrote ${svg}\n`);
    }
    if (html !== undefined) {
      await writeFile(html, renderHtml(sim));
      io.stderr.write(`tokenpace simulate: wrote ${html}\n`);
    }
  } catch (error) {
    io.stderr.write(`tokenpace simulate: cannot write the plot: ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  }
  return EXIT_OK;
}

async function pipeCommand(p: Parsed, io: Io): Promise<number> {
  const ratePerSecond = byteRateFlag(p, 'rate', true);
  const burst = byteSizeFlag(p, 'burst');
  const peakRate = byteRateFlag(p, 'peak-rate');
  if (p.positionals.length > 1) throw new UsageError(`expected at most one FILE, got ${p.positionals.length}`);
  const redis = stringFlag(p, 'redis');
  const key = stringFlag(p, 'key');
  const onError = stringFlag(p, 'on-error');
  const workersText = stringFlag(p, 'workers');
  if (redis === undefined) {
    for (const [flag, value] of [
      ['key', key],
      ['on-error', onError],
      ['workers', workersText],
    ] as const) {
      if (value !== undefined) throw new UsageError(`--${flag} applies to a fleet pipe: give --redis URL too`);
    }
  } else {
    if (key === undefined) throw new UsageError('--redis needs --key NAME: the name the pipes that share the rate use');
    if (peakRate !== undefined) throw new UsageError('--peak-rate is not supported with --redis');
    if (onError !== undefined && onError !== 'deny' && onError !== 'allow' && onError !== 'local') {
      throw new UsageError(`--on-error: expected deny, allow or local, got ${JSON.stringify(onError)}`);
    }
    if (onError === 'local' && workersText === undefined) {
      throw new UsageError('--on-error local needs --workers N: each pipe falls back to rate / N');
    }
  }
  const workers = workersText === undefined ? undefined : Number(workersText);
  if (workers !== undefined && !(Number.isSafeInteger(workers) && workers >= 1)) {
    throw new UsageError(`--workers: expected a whole number >= 1, got ${JSON.stringify(workersText)}`);
  }
  return runPipe(
    { ratePerSecond, burst, peakRate, file: p.positionals[0], redis, key, onError: onError as FailurePolicy, workers },
    io,
  );
}

const COMMANDS = {
  explain: {
    usage: EXPLAIN_USAGE,
    flags: {
      rate: { type: 'string' },
      burst: { type: 'string' },
      instances: { type: 'string' },
      calls: { type: 'string' },
      json: { type: 'boolean' },
    },
    positionals: false,
    run: explainCommand,
  },
  simulate: {
    usage: SIMULATE_USAGE,
    flags: {
      rate: { type: 'string' },
      burst: { type: 'string' },
      scenario: { type: 'string' },
      compare: { type: 'string' },
      variant: { type: 'string' },
      svg: { type: 'string' },
      html: { type: 'string' },
      json: { type: 'boolean' },
    },
    positionals: false,
    run: simulateCommand,
  },
  pipe: {
    usage: PIPE_USAGE,
    flags: {
      rate: { type: 'string' },
      burst: { type: 'string' },
      'peak-rate': { type: 'string' },
      redis: { type: 'string' },
      key: { type: 'string' },
      'on-error': { type: 'string' },
      workers: { type: 'string' },
    },
    positionals: true,
    run: pipeCommand,
  },
} as const;

/** Runs `tokenpace` with `argv` (the arguments after the program name). Returns the exit code. */
export async function run(argv: string[], io: Io): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    (command === undefined ? io.stderr : io.stdout).write(MAIN_USAGE);
    return command === undefined ? EXIT_USAGE : EXIT_OK;
  }
  if (command === '-v' || command === '--version' || command === 'version') {
    io.stdout.write(`${version()}\n`);
    return EXIT_OK;
  }
  const spec = (COMMANDS as Record<string, (typeof COMMANDS)[keyof typeof COMMANDS]>)[command];
  if (spec === undefined) {
    io.stderr.write(`tokenpace: unknown command ${JSON.stringify(command)}\n\n${MAIN_USAGE}`);
    return EXIT_USAGE;
  }
  try {
    const parsed = parseFlags(rest, spec.flags, spec.positionals);
    if (parsed.values.help) {
      io.stdout.write(spec.usage);
      return EXIT_OK;
    }
    return await spec.run(parsed, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(`tokenpace ${command}: ${error.message}\n\n${spec.usage}`);
      return EXIT_USAGE;
    }
    if (isTokenpaceError(error)) {
      io.stderr.write(`tokenpace ${command}: ${error.message}\n`);
      return EXIT_USAGE;
    }
    io.stderr.write(`tokenpace ${command}: ${(error as Error).stack ?? String(error)}\n`);
    return EXIT_FAILURE;
  }
}
