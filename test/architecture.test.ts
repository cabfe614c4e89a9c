/**
 * The layout's rules, checked on the source itself (docs/architecture.md): no import cycle between
 * files or between folders of src/, and the leaves import nothing of ours. (A file is split where it
 * holds two ideas, not by its length.)
 */

import { describe, expect, it } from 'vitest';
import { cycles, folderOf, importGraph } from './helpers/import-graph.js';

const graph = importGraph();

/** A file directly in src/ is a node of its own at folder level; a folder's files are one node. */
function nodeOf(file: string): string {
  return folderOf(file) === '.' ? file : folderOf(file);
}

describe('the layout of src/', () => {
  it('has no import cycle between files, of any length (type imports included)', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('has no import cycle between its folders', () => {
    const folders = new Map<string, string[]>();
    for (const [file, targets] of graph) {
      const from = nodeOf(file);
      const set = new Set(folders.get(from) ?? []);
      for (const target of targets) if (nodeOf(target) !== from) set.add(nodeOf(target));
      folders.set(from, [...set]);
    }
    expect(cycles(folders)).toEqual([]);
  });

  it.each(['units.ts', 'clock.ts', 'timer.ts', 'errors.ts', 'diagnostics.ts'])(
    'the leaf %s imports nothing of ours but other leaves',
    (leaf) => {
      const leaves = new Set(['units.ts', 'clock.ts', 'timer.ts', 'errors.ts', 'diagnostics.ts']);
      expect((graph.get(leaf) ?? []).filter((target) => !leaves.has(target))).toEqual([]);
    },
  );

  it('keeps diagnostics.ts free of any import of ours (channel names and objects only)', () => {
    expect(graph.get('diagnostics.ts')).toEqual([]);
  });

  it('imports only down the layers of docs/architecture.md', () => {
    const layer: Record<string, number> = {
      'index.ts': 6,
      cli: 6,
      http: 5,
      scheduler: 4,
      postgres: 4,
      stream: 4,
      fleet: 3,
      keyed: 3,
      redis: 2,
      meters: 1,
      stores: 1,
      'units.ts': 0,
      'errors.ts': 0,
      'clock.ts': 0,
      'timer.ts': 0,
      'diagnostics.ts': 0,
    };
    const wrong: string[] = [];
    for (const [file, targets] of graph) {
      const from = nodeOf(file);
      for (const target of targets) {
        const to = nodeOf(target);
        if (to === from) continue;
        const a = layer[from];
        const b = layer[to];
        if (a === undefined || b === undefined) wrong.push(`${file} -> ${target}: a folder with no layer`);
        else if (!(b < a || (a === 0 && b === 0))) wrong.push(`${file} -> ${target} (layer ${a} -> ${b})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('finds the cycles it is meant to find (the checker itself)', () => {
    const fixture = new Map([
      ['a.ts', ['b/x.ts']],
      ['b/x.ts', ['c/y.ts']],
      ['c/y.ts', ['a.ts']],
      ['d.ts', []],
    ]);
    expect(cycles(fixture)).toEqual([['a.ts', 'b/x.ts', 'c/y.ts']]);
  });
});
