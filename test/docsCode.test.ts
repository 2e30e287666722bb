// Every code block in docs/ (and README.md) that claims to run is compiled or run (#16 item 5):
// - each ```ts block is typechecked against the package's source, all blocks in one `tsc` run:
//   a block is written to .tmp/docs-code/ as its own module, `audio-proxy` (and its subpaths)
//   mapped to src/ by tsconfig `paths`. A block that uses names its page introduced earlier (a
//   `proxy`, an Express `app`) states them in an HTML comment just above it, invisible on the
//   page: `<!-- ts-context: declare const proxy: AudioProxy; -->`, compiled before the block;
//   `<!-- ts-continues -->` compiles the page's previous block (and its context) first.
//   A block that cannot compile even so is marked `<!-- fragment: why -->` and skipped; none is
//   today, and a fragment without a reason fails.
// - each ```js block passes `node --check` (syntax) as an ES module;
// - every `audio-proxy …` command in a shell block or an inline code span names a command the
//   CLI has and only flags that command's `--help` lists; every `npm run X`/`npm start`/`npm
//   test` names a script of package.json; every `npx tsx <file>` names a file that exists, and
//   `npm run bench -- <name>` a scenario bench/run.ts knows.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const REPO = process.cwd();
const OUT = join(REPO, '.tmp', 'docs-code');
/** One `tsc --noEmit` over every block (and the src/ they import): ~20 s idle, 4× on a busy box. */
const TSC_TIMEOUT_MS = 120_000;

interface Block {
  readonly file: string; // relative to the repo
  readonly line: number; // 1-based line of the first line of code
  readonly lang: string;
  readonly code: string;
  readonly context: string | undefined;
  readonly fragment: string | undefined;
}

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? markdownFiles(join(dir, e.name))
      : e.name.endsWith('.md')
        ? [join(dir, e.name)]
        : [],
  );
}

const PAGES = [...markdownFiles(join(REPO, 'docs')), join(REPO, 'README.md')];

/** The fenced blocks of a page, with the HTML comments that stand just above each. */
function blocksOf(path: string): Block[] {
  const lines = readFileSync(path, 'utf8').split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end]!)) end++;
    const code = lines
      .slice(start, end)
      .map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length)))
      .join('\n');
    // The HTML comments right above the fence (blank lines allowed between), each on one line
    // or several.
    let context: string | undefined;
    let fragment: string | undefined;
    let continues = false;
    for (let j = i - 1; j >= 0; j--) {
      if (lines[j]!.trim() === '') continue;
      if (!lines[j]!.trimEnd().endsWith('-->')) break;
      let k = j;
      while (k > 0 && !lines[k]!.includes('<!--')) k--;
      const c = /<!--\s*(ts-context|ts-continues|fragment)\b:?([\s\S]*?)-->/.exec(
        lines.slice(k, j + 1).join('\n'),
      );
      if (!c) break;
      if (c[1] === 'ts-context') context = c[2]!.trim();
      else if (c[1] === 'ts-continues') continues = true;
      else fragment = c[2]!.trim();
      j = k;
    }
    if (continues) {
      // The block goes on from the page's previous TypeScript block (its names are in scope).
      const previous = out.filter((b) => b.lang === open[2]).at(-1);
      if (!previous) throw new Error(`${path}:${start}: ts-continues with no block before it`);
      context = [previous.context, previous.code, context].filter(Boolean).join('\n');
    }
    out.push({
      file: relative(REPO, path),
      line: start + 1,
      lang: open[2]!,
      code,
      context,
      fragment,
    });
    i = end;
  }
  return out;
}

const BLOCKS = PAGES.flatMap(blocksOf);
const TS = BLOCKS.filter((b) => b.lang === 'ts' || b.lang === 'typescript');

describe('docs: TypeScript blocks compile against the package', () => {
  let diagnostics = '';
  /** Generated file name → the block it holds and how many prelude lines precede its code. */
  const index = new Map<string, { block: Block; offset: number }>();

  beforeAll(async () => {
    rmSync(OUT, { recursive: true, force: true });
    mkdirSync(OUT, { recursive: true });
    TS.forEach((block, n) => {
      if (block.fragment !== undefined) return;
      const name = `block${String(n).padStart(3, '0')}.ts`;
      // Each block is a module of its own (`export {}`), so two pages may both declare `proxy`.
      const prelude = ['export {};', ...(block.context ? [block.context] : [])];
      writeFileSync(join(OUT, name), `${prelude.join('\n')}\n${block.code}\n`);
      index.set(name, { block, offset: prelude.join('\n').split('\n').length });
    });
    writeFileSync(
      join(OUT, 'tsconfig.json'),
      JSON.stringify({
        extends: '../../tsconfig.json',
        compilerOptions: {
          noEmit: true,
          paths: {
            'audio-proxy': ['../../src/index.ts'],
            'audio-proxy/*': ['../../src/*.ts', '../../src/*/index.ts'],
          },
        },
        // src/'s own ambient declarations (ws, comlink's node adapter) come along.
        include: ['*.ts', '../../src/**/*.d.ts'],
      }),
    );
    try {
      await run(process.execPath, [join(REPO, 'node_modules/typescript/bin/tsc'), '-p', OUT], {
        cwd: REPO,
        timeout: TSC_TIMEOUT_MS,
        maxBuffer: 16 * 1024 * 1024,
      });
    } catch (error) {
      const e = error as { stdout?: string; stderr?: string; message: string };
      diagnostics = `${e.stdout ?? ''}${e.stderr ?? ''}` || e.message;
    }
  }, TSC_TIMEOUT_MS + 10_000);

  it('finds the blocks, and every fragment says why it is one', () => {
    expect(TS.length).toBeGreaterThanOrEqual(14);
    for (const b of TS.filter((x) => x.fragment !== undefined)) {
      expect(b.fragment, `${b.file}:${b.line} fragment without a reason`).not.toBe('');
    }
  });

  it('typechecks every block that is not a fragment', () => {
    // Map `.tmp/docs-code/blockNNN.ts(L,C): error …` back to the page and line it came from.
    const located = diagnostics
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const m = /block\d{3}\.ts\((\d+),(\d+)\)(.*)$/.exec(l);
        const name = /(block\d{3}\.ts)/.exec(l)?.[1];
        const entry = name ? index.get(name) : undefined;
        if (!m || !entry) return l;
        const inBlock = Number(m[1]) - entry.offset;
        if (inBlock < 1) return `${entry.block.file}:${entry.block.line} (its context)${m[3]}`;
        return `${entry.block.file}:${entry.block.line + inBlock - 1}:${m[2]}${m[3]}`;
      });
    expect(located).toEqual([]);
  });
});

describe('docs: JavaScript blocks parse', () => {
  const JS = BLOCKS.filter((b) => b.lang === 'js' || b.lang === 'javascript');

  it.each(JS.map((b) => [`${b.file}:${b.line}`, b] as const))('%s', async (_, block) => {
    mkdirSync(OUT, { recursive: true });
    const path = join(OUT, `check-${block.file.replace(/\W/g, '_')}-${block.line}.mjs`);
    writeFileSync(path, block.code);
    await expect(run(process.execPath, ['--check', path])).resolves.toBeDefined();
  });
});

/** Inline code spans of a page (outside fenced blocks). */
function inlineSpans(path: string): string[] {
  const text = readFileSync(path, 'utf8').replace(/^\s*```[\s\S]*?^\s*```\s*$/gm, '');
  return [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
}

/** Shell commands the docs show: lines of sh blocks, and inline spans that are commands. */
function shellCommands(): { where: string; text: string }[] {
  const out: { where: string; text: string }[] = [];
  for (const b of BLOCKS.filter((x) => ['sh', 'bash', 'shell', 'console'].includes(x.lang))) {
    b.code.split('\n').forEach((text, i) => {
      out.push({ where: `${b.file}:${b.line + i}`, text });
    });
  }
  for (const page of PAGES) {
    for (const span of inlineSpans(page)) {
      if (/^(npx |npm |audio-proxy )/.test(span))
        out.push({ where: relative(REPO, page), text: span });
    }
  }
  return out;
}

interface CliCommand {
  readonly name: string;
  readonly args: readonly string[];
}

/**
 * `audio-proxy <command> <args…>` run as a command in a line: at the start of the line or after
 * `$(`, `&&`, `;`, `|` or `(`, behind any `NAME=value` assignments, `sudo` or `npx`; its args
 * end at a shell delimiter. (`-g audio-proxy` or `/opt/audio-proxy` are not the CLI.)
 */
function cliCommands(line: string): CliCommand[] {
  const found: CliCommand[] = [];
  const re =
    /(?:^|\$\(|&&|;|\||\()\s*(?:\w+=\S*\s+)*(?:sudo\s+)?(?:npx\s+)?audio-proxy((?: +[^\s)|;&#]+)*)/g;
  for (const m of line.matchAll(re)) {
    // `[--port N]` in a usage line is the flag `--port`.
    const tokens = m[1]!
      .trim()
      .split(/ +/)
      .map((t) => t.replace(/^\[|\]$/g, ''))
      .filter(Boolean);
    if (tokens.length === 0) continue;
    found.push({ name: tokens[0]!, args: tokens.slice(1) });
  }
  return found;
}

describe('docs: the commands named exist', () => {
  const COMMANDS = shellCommands();
  const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const usage = new Map<string, string>();

  async function help(command: string | undefined): Promise<string> {
    const key = command ?? '';
    if (!usage.has(key)) {
      const args = command ? [command, '--help'] : ['--help'];
      const { stdout } = await run(process.execPath, [join(REPO, 'bin/audio-proxy.mjs'), ...args], {
        env: { PATH: process.env.PATH ?? '', AUDIO_PROXY_FROM_SOURCE: '1' },
        timeout: 30_000,
      });
      usage.set(key, stdout);
    }
    return usage.get(key)!;
  }

  it('finds the commands the pages show', () => {
    expect(COMMANDS.flatMap((c) => cliCommands(c.text)).length).toBeGreaterThan(10);
  });

  it('names only audio-proxy commands and flags the CLI has', async () => {
    const top = await help(undefined);
    const known = new Set([...top.matchAll(/^ {2}(\w+) {2,}/gm)].map((m) => m[1]!));
    expect([...known].sort()).toEqual(['demo', 'inspect', 'serve', 'sign']);
    const wrong: string[] = [];
    for (const c of COMMANDS) {
      for (const { name, args } of cliCommands(c.text)) {
        if (name === '--version' || name === '--help' || name === '[<command>]') continue;
        if (name.startsWith('<') || name === '…') continue; // a placeholder in prose
        if (!known.has(name)) {
          wrong.push(`${c.where}: audio-proxy ${name}: no such command`);
          continue;
        }
        const text = await help(name);
        for (const arg of args.filter((a) => a.startsWith('--'))) {
          const flag = arg.split('=')[0]!;
          if (!new RegExp(`(^|\\s)${flag}(\\s|$)`, 'm').test(text)) {
            wrong.push(`${c.where}: audio-proxy ${name} ${flag}: not an option`);
          }
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('names only npm scripts package.json has, and files that exist', () => {
    const bench = readFileSync(join(REPO, 'bench/run.ts'), 'utf8');
    const wrong: string[] = [];
    for (const c of COMMANDS) {
      for (const m of c.text.matchAll(/\bnpm (?:run(?: -s)? ([\w:-]+)|(start|test)\b)/g)) {
        const script = m[1] ?? m[2]!;
        if (!(script in pkg.scripts))
          wrong.push(`${c.where}: npm script "${script}" does not exist`);
      }
      for (const m of c.text.matchAll(/\bnpm run bench -- (\w[\w-]*)/g)) {
        if (!new RegExp(`^\\s*['"]?${m[1]}['"]?: \\{`, 'm').test(bench)) {
          wrong.push(`${c.where}: bench scenario "${m[1]}" is not in bench/run.ts`);
        }
      }
      for (const m of c.text.matchAll(/\bnpx tsx ([\w./-]+\.ts)\b/g)) {
        if (!existsSync(join(REPO, m[1]!))) wrong.push(`${c.where}: ${m[1]} does not exist`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
