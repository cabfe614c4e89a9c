/**
 * Every TypeScript block of the README and of the guides in docs/ compiles as written: a reader who pastes one into a file of
 * their own gets no error from `tsc --strict`, imports included and no name left undefined.
 *
 * The blocks are found generically (a fence whose info string starts with `ts` or `typescript`),
 * so a section added later is checked without touching this file. Each block is its own ES
 * module, type-checked with the project's compiler options (strict, NodeNext) in one program for
 * all of them; `'tokenpace'` resolves to src/index.ts, so no build is needed. A block that is truly
 * only an illustration (a signature, a fragment) opts out with the info string `ts no-check`.
 */

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { type MarkdownBlock, typescriptBlocks } from './helpers/markdown-blocks.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

type ReadmeBlock = MarkdownBlock;

/** The anchors GitHub gives a Markdown file's headings (outside code blocks). */
function headingSlugs(markdown: string): Set<string> {
  const slugs = new Set<string>();
  let fence = '';
  for (const line of markdown.split('\n')) {
    const open = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (open) {
      if (fence === '') fence = open[1] as string;
      else if ((open[1] as string).startsWith(fence)) fence = '';
      continue;
    }
    const heading = /^#{1,6}\s+(.*)$/.exec(line);
    if (heading && fence === '') {
      const base = (heading[1] as string)
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-');
      let slug = base;
      for (let i = 1; slugs.has(slug); i++) slug = `${base}-${i}`;
      slugs.add(slug);
    }
  }
  return slugs;
}

const compilerOptions = (() => {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  if (!config) throw new Error('tsconfig.json could not be read');
  const options: ts.CompilerOptions = {
    ...config.options,
    noEmit: true,
    skipLibCheck: true,
    baseUrl: root,
    paths: {
      tokenpace: ['./src/index.ts'],
      'tokenpace/p-queue': ['./src/scheduler/p-queue.ts'],
      'tokenpace/fastify': ['./src/http/fastify-plugin.ts'],
    },
  };
  return options;
})();

/**
 * Type-checks each block as an ES module of its own, all in one program, and returns each block's
 * diagnostics as `README.md:<line>: <message>`.
 */
function checkBlocks(blocks: readonly { block: ReadmeBlock; name: string }[]): Map<ReadmeBlock, string[]> {
  const fileOf = new Map(blocks.map(({ block, name }) => [join(root, `${name}.line-${block.line}.mts`), block]));
  const nameOf = new Map(blocks.map(({ block, name }) => [block, name]));
  // `export {}` makes a block without imports a module of its own, as it is in the reader's file.
  const textOf = (file: string) => {
    const block = fileOf.get(file);
    return block && `${block.code}\nexport {};\n`;
  };
  const host = ts.createCompilerHost(compilerOptions, true);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (file) => fileOf.has(file) || fileExists.call(host, file);
  host.readFile = (file) => textOf(file) ?? readFile.call(host, file);
  host.getSourceFile = (file, language, onError, fresh) => {
    const text = textOf(file);
    return text === undefined
      ? getSourceFile.call(host, file, language, onError, fresh)
      : ts.createSourceFile(file, text, language, true);
  };
  const program = ts.createProgram({ rootNames: [...fileOf.keys()], options: compilerOptions, host });
  for (const diagnostic of [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()]) {
    throw new Error(`compiler options: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`);
  }
  const result = new Map<ReadmeBlock, string[]>();
  for (const [file, block] of fileOf) {
    const sourceFile = program.getSourceFile(file);
    if (!sourceFile) throw new Error(`${file} is missing from the program`);
    const messages = [
      ...program.getSyntacticDiagnostics(sourceFile),
      ...program.getSemanticDiagnostics(sourceFile),
    ].map((diagnostic) => {
      const { line } = sourceFile.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      return `${nameOf.get(block)}:${block.line + 1 + line}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ')}`;
    });
    result.set(block, messages);
  }
  return result;
}

/** README.md and every Markdown file under docs/, as paths relative to the repository. */
function markdownFiles(): string[] {
  const out = ['README.md'];
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const path = join(dir, name);
      if (statSync(join(root, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) out.push(path);
    }
  };
  if (existsSync(join(root, 'docs'))) walk('docs');
  return out;
}

const files = markdownFiles().map((name) => ({ name, text: readFileSync(join(root, name), 'utf8') }));
const readme = files[0]?.text ?? '';
const blocksOf = files.map(({ name, text }) => ({ name, blocks: typescriptBlocks(text) }));
const blocks = blocksOf.flatMap(({ blocks }) => blocks);
const named = blocksOf.flatMap(({ name, blocks }) =>
  blocks.filter((block) => !/\bno-check\b/.test(block.info)).map((block) => ({ block, name })),
);
const checked = named.map(({ block }) => block);
const nameOfBlock = new Map(named.map(({ block, name }) => [block, name]));
// A fixture checked in the same program (one compile for the whole file): it shows that a block
// that does not compile is reported, at its line, and that blocks do not see each other's names.
const fixture = typescriptBlocks(
  [
    '# x', // 1
    '```ts', // 2
    "import { TokenBucket } from 'tokenpace';", // 3
    'const bucket = new TokenBucket({ rate: 10, burst: 1 });', // 4
    '```', // 5
    '```ts', // 6
    'bucket.tryTake();', // 7: not defined in this block
    "const n: number = '1';", // 8
    '```', // 9
  ].join('\n'),
);
let diagnostics = new Map<ReadmeBlock, string[]>();
let fixtureDiagnostics = new Map<ReadmeBlock, string[]>();

beforeAll(() => {
  const all = checkBlocks([...named, ...fixture.map((block) => ({ block, name: 'FIXTURE.md' }))]);
  diagnostics = new Map(checked.map((block) => [block, all.get(block) ?? ['not checked']]));
  fixtureDiagnostics = new Map(fixture.map((block) => [block, all.get(block) ?? ['not checked']]));
}, 120_000);

describe('README and docs/', () => {
  it('has TypeScript blocks to check, and checks all but the opted-out ones', () => {
    const fences = files
      .map(
        ({ text }) => text.split('\n').filter((line) => /^\s{0,3}(`{3,}|~{3,})\s*(ts|typescript)\b/i.test(line)).length,
      )
      .reduce((a, b) => a + b, 0);
    expect(blocks.length).toBe(fences);
    expect(typescriptBlocks(readme).length).toBeGreaterThanOrEqual(3);
    expect(checked.length).toBeGreaterThanOrEqual(20);
  });

  it.each(checked.map((block) => [nameOfBlock.get(block), block.line, block] as const))(
    '%s: the block at line %d compiles as written',
    (_name, _line, block) => {
      expect(diagnostics.get(block)).toEqual([]);
    },
  );

  it('links only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const { name, text } of files) {
      const prose = text.replace(/^(\s{0,3})(`{3,}|~{3,})[\s\S]*?^\1\2\s*$/gm, '');
      for (const match of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1] as string;
        if (/^[a-z]+:/i.test(target)) continue; // http:, mailto:
        const [path = '', anchor] = target.split('#');
        const file = path === '' ? name : relative(root, join(root, dirname(name), path));
        if (!existsSync(join(root, file))) {
          broken.push(`${name}: ${target} (no file ${file})`);
          continue;
        }
        if (
          anchor !== undefined &&
          file.endsWith('.md') &&
          !headingSlugs(readFileSync(join(root, file), 'utf8')).has(anchor)
        ) {
          broken.push(`${name}: ${target} (no heading #${anchor} in ${file})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('finds blocks the way Markdown does', () => {
    const text = [
      'intro',
      '```ts',
      'const a = 1;',
      '```',
      '```sh',
      'npm test',
      '```',
      '````typescript title="x"',
      'const b = "```";',
      '````',
      '```ts no-check',
      'declare const c: number;',
      '```',
      '  ```ts',
      '  const d = 4;',
      '  ```',
      '~~~TS',
      'const e = 5;',
      '~~~',
    ].join('\n');
    expect(typescriptBlocks(text)).toEqual([
      { line: 2, info: 'ts', code: 'const a = 1;' },
      { line: 8, info: 'typescript title="x"', code: 'const b = "```";' },
      { line: 11, info: 'ts no-check', code: 'declare const c: number;' },
      { line: 14, info: 'ts', code: 'const d = 4;' },
      { line: 17, info: 'TS', code: 'const e = 5;' },
    ]);
  });

  it('reports what does not compile at its README line, each block a module of its own', () => {
    expect([...fixtureDiagnostics.values()]).toEqual([
      [],
      ["FIXTURE.md:7: Cannot find name 'bucket'.", "FIXTURE.md:8: Type 'string' is not assignable to type 'number'."],
    ]);
  });
});
