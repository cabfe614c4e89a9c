/**
 * The unit tests need no service. vitest.unit.config.ts leaves out the suites listed in its
 * `serviceSuites`; this checks the list against the suites themselves: a suite that reaches Redis or
 * PostgreSQL (in its own text, or in a module of test/ or examples/ that it imports) is listed, and every entry
 * names a suite that exists. The Scheduler suites' forms helper is the one module that adapts (its
 * Redis form exists only where a redis-server was started), so it does not count as reaching one.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { serviceSuites } from '../vitest.unit.config.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ADAPTS = 'test/helpers/scheduler-forms.ts';
const SELF = relative(root, fileURLToPath(import.meta.url)); // its patterns below are no sign of a service
/** The signs of a service: the run's redis-server, one of its own, or the PostgreSQL server. */
const SERVICE = /inject\('redisPort'\)|startRedis(Cluster)?\(|postgres:\/\/|PGPORT|127\.0\.0\.1:5432/;
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'";]*?from\s*['"](\.[^'"]+)['"]/g;

function suites(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return suites(path);
    return name.endsWith('.test.ts') && !name.endsWith('.chromium.test.ts') ? [path] : [];
  });
}

/** The first module on `file`'s import chain (itself included) that shows a sign of a service. */
function reachesService(file: string, seen = new Set<string>()): string | undefined {
  if (seen.has(file) || file === ADAPTS || file === SELF || !/^(test|examples)\//.test(file)) return undefined;
  if (!existsSync(join(root, file))) return undefined;
  seen.add(file);
  const text = readFileSync(join(root, file), 'utf8');
  if (SERVICE.test(text)) return file;
  for (const match of text.matchAll(IMPORT)) {
    const target = relative(root, resolve(dirname(join(root, file)), (match[1] as string).replace(/\.js$/, '.ts')));
    const found = reachesService(target, seen);
    if (found !== undefined) return found;
  }
  return undefined;
}

describe('the unit tests (vitest.unit.config.ts)', () => {
  const all = suites('test');

  it('leave out every suite that reaches a service', () => {
    const unlisted = all
      .filter((suite) => !serviceSuites.includes(suite))
      .flatMap((suite) => {
        const via = reachesService(suite);
        return via === undefined ? [] : [`${suite} (through ${via})`];
      });
    expect(unlisted.join('\n')).toBe('');
  });

  it('list only suites that exist and reach a service', () => {
    expect(serviceSuites.filter((suite) => !all.includes(suite) || reachesService(suite) === undefined)).toEqual([]);
  });

  it('see a service where there is one', () => {
    expect(reachesService('test/keyed/contract.test.ts')).toBe('test/keyed/contract.test.ts');
    expect(reachesService('test/scheduler/scheduler.test.ts')).toBeUndefined();
  });
});
