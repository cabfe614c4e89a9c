/**
 * The fenced TypeScript blocks of a Markdown text, found the way Markdown does: a fence of three or
 * more backticks or tildes, indented at most three spaces, whose info string starts with `ts` or
 * `typescript`; the body is dedented by the fence's indent. Used by the docs' type-check
 * (test/readme.test.ts) and by the run of every runnable block (test/docs-examples.test.ts).
 */
export interface MarkdownBlock {
  /** The line of the opening fence (1-based). */
  line: number;
  /** The whole info string, such as `ts no-run`. */
  info: string;
  code: string;
}

export function typescriptBlocks(markdown: string): MarkdownBlock[] {
  const blocks: MarkdownBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s{0,3})(`{3,}|~{3,})\s*([^`\s]*)(.*)$/.exec(lines[i] ?? '');
    if (!open) continue;
    const [, indent = '', fence = '', lang = '', rest = ''] = open;
    const closes = new RegExp(`^\\s{0,3}${fence[0]}{${fence.length},}\\s*$`);
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j] ?? '';
      if (closes.test(line)) break;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line);
    }
    if (/^(ts|typescript)$/i.test(lang))
      blocks.push({ line: i + 1, info: `${lang}${rest}`.trim(), code: body.join('\n') });
    i = j; // skip the body and the closing fence
  }
  return blocks;
}
