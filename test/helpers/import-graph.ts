/**
 * The import graph of src/: every relative import (values and types alike) of
 * every file, and the cycles in it, between files and between folders. Used by
 * test/architecture.test.ts; also runnable: `npx tsx test/helpers/import-graph.ts`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path));
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out.sort();
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'";]*?from\s*['"](\.[^'"]+)['"]/g;

/** File (relative to src/) -> the files it imports (relative to src/). */
export function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of filesUnder(SRC)) {
    const text = readFileSync(file, 'utf8');
    const targets: string[] = [];
    for (const match of text.matchAll(IMPORT)) {
      const spec = match[1] as string;
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      targets.push(relative(SRC, target));
    }
    graph.set(relative(SRC, file), [...new Set(targets)]);
  }
  return graph;
}

/** The folder a file belongs to: its first path segment, or '.' for a file directly in src/. */
export function folderOf(file: string): string {
  const i = file.indexOf('/');
  return i < 0 ? '.' : file.slice(0, i);
}

/** The strongly connected components with more than one node (or a self-loop): Tarjan's algorithm. */
export function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (node: string): void => {
    indices.set(node, index);
    low.set(node, index);
    index += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indices.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) as number, low.get(next) as number));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node) as number, indices.get(next) as number));
      }
    }
    if (low.get(node) === indices.get(node)) {
      const component: string[] = [];
      let top: string;
      do {
        top = stack.pop() as string;
        onStack.delete(top);
        component.push(top);
      } while (top !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) out.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!indices.has(node)) visit(node);
  return out;
}

/** The folder graph: folder -> folders it imports from (itself excluded). */
export function folderGraph(graph: Map<string, string[]>): Map<string, string[]> {
  const folders = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    const from = folderOf(file);
    const set = folders.get(from) ?? new Set<string>();
    for (const target of targets) {
      const to = folderOf(target);
      if (to !== from) set.add(to);
    }
    folders.set(from, set);
  }
  // Files directly in src/ are leaves or the root index; treat each as its own node.
  return new Map([...folders].map(([k, v]) => [k, [...v]]));
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const graph = importGraph();
  console.log('file cycles:', JSON.stringify(cycles(graph), null, 1));
  const fileLevel = new Map<string, string[]>();
  for (const [file, targets] of graph) {
    const from = folderOf(file) === '.' ? file : folderOf(file);
    const set = new Set(fileLevel.get(from) ?? []);
    for (const t of targets) {
      const to = folderOf(t) === '.' ? t : folderOf(t);
      if (to !== from) set.add(to);
    }
    fileLevel.set(from, [...set]);
  }
  console.log('folder cycles:', JSON.stringify(cycles(fileLevel), null, 1));
}
