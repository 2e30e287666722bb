// docs/ agrees with the code: the error table in docs/errors.md and `ERROR_TABLE` match in both
// directions, and each documented row is what `errorResponse` really sends; the metric table in
// docs/operations.md (ours and the standard process ones) is exactly what a real proxy's
// /metrics exposes (names and types); every name the docs import from 'audio-proxy' is exported
// by src/index.ts; every link between the pages points at a page (and a heading) that exists.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/index.js';
import type { Failure } from '../src/core/failure.js';
import { ERROR_TABLE, type ErrorRow, errorResponse } from '../src/http/errors.js';
import * as publicSurface from '../src/index.js';
import { createAudioProxy } from '../src/proxy.js';

const DOC = readFileSync(join(process.cwd(), 'docs/errors.md'), 'utf8');

interface DocRow {
  readonly status: number;
  readonly error: string;
  /** `undefined` where the page says the message names the offending segment. */
  readonly message: string | undefined;
  readonly cacheControl: string;
  readonly extraHeader: 'retry-after' | 'content-range' | undefined;
}

const unquote = (cell: string) => cell.replace(/^`(.*)`$/, '$1');

function documentedRows(): DocRow[] {
  return DOC.split('\n')
    .filter((line) => /^\| \d{3} /.test(line))
    .map((line) => {
      const [status, error, message, cacheControl, extra] = line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim());
      const header = extra!.split(':')[0]!.replace(/`/g, '').toLowerCase();
      return {
        status: Number(status),
        error: unquote(error!),
        message: message!.startsWith('_') ? undefined : message,
        cacheControl: unquote(cacheControl!),
        extraHeader: header === '' ? undefined : (header as DocRow['extraHeader']),
      };
    });
}

const fromCode = (r: ErrorRow): DocRow => ({
  status: r.status,
  error: r.error,
  message: r.message,
  cacheControl: r.cacheControl,
  extraHeader: r.extraHeader,
});

/** A failure of each row's class, with whatever data the class needs. */
function failureFor(r: ErrorRow): Failure {
  switch (r.type) {
    case 'not_found':
      return { type: 'not_found', scope: r.scope ?? 'source' };
    case 'invalid_options':
    case 'unsupported_option':
      return { type: r.type, message: 'unknown option "xyz:1"' };
    case 'queue_full':
      return { type: 'queue_full', retryAfterS: 3 };
    case 'shutting_down':
      return { type: 'shutting_down', retryAfterS: 1 };
    case 'range_not_satisfiable':
      return { type: 'range_not_satisfiable', size: 1234 };
    default:
      return { type: r.type } as Failure;
  }
}

describe('docs/errors.md against ERROR_TABLE', () => {
  const documented = documentedRows();
  const key = (r: DocRow) => JSON.stringify(r);

  it('documents every row of the code exactly once', () => {
    expect(ERROR_TABLE.length).toBeGreaterThan(10);
    for (const row of ERROR_TABLE) {
      const matches = documented.filter((d) => key(d) === key(fromCode(row)));
      expect(matches, `${row.type}${row.scope ? ` (${row.scope})` : ''}`).toHaveLength(1);
    }
  });

  it('documents nothing the code does not have', () => {
    const code = new Set(ERROR_TABLE.map((r) => key(fromCode(r))));
    expect(documented.filter((d) => !code.has(key(d)))).toEqual([]);
    expect(documented).toHaveLength(ERROR_TABLE.length);
  });

  it('each documented row is what errorResponse sends', () => {
    for (const row of ERROR_TABLE) {
      const response = errorResponse(failureFor(row));
      const body = JSON.parse(response.body) as { error: string; message: string };
      const doc = documented.find((d) => key(d) === key(fromCode(row)))!;
      expect(response.status).toBe(doc.status);
      expect(body.error).toBe(doc.error);
      if (doc.message !== undefined) expect(body.message).toBe(doc.message);
      else expect(body.message).toBe('unknown option "xyz:1"');
      expect(response.headers['cache-control']).toBe(doc.cacheControl);
      expect(response.headers['content-type']).toBe('application/json');
      if (doc.extraHeader) expect(response.headers[doc.extraHeader]).toBeDefined();
      const extras = Object.keys(response.headers).filter(
        (h) => h !== 'content-type' && h !== 'cache-control',
      );
      expect(extras).toEqual(doc.extraHeader ? [doc.extraHeader] : []);
    }
  });
});

describe('docs/operations.md against /metrics', () => {
  it('lists every metric a running proxy exposes, with its type, and nothing else', async () => {
    const proxy = await createAudioProxy({
      config: loadConfig({ AP_LOG_LEVEL: 'error' }),
      logger: pino({ level: 'silent' }),
    });
    let exposed: string;
    try {
      exposed = (await proxy.metrics.expose()).body;
    } finally {
      await proxy.close();
    }
    const fromMetrics = new Map(
      [...exposed.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]),
    );
    const page = readFileSync(join(process.cwd(), 'docs/operations.md'), 'utf8');
    const fromPage = new Map(
      [
        ...page.matchAll(
          /^\| `((?:audio_proxy|process|nodejs)_\w+)` +\| (\w+) +\| [^|]*\| (.*)\|$/gm,
        ),
      ]
        // prom-client reads these from /proc: elsewhere they are not exposed
        .filter((m) => process.platform === 'linux' || !m[3]!.includes('(Linux)'))
        .map((m) => [m[1]!, m[2]!]),
    );
    expect(fromMetrics.size).toBeGreaterThan(10);
    expect(Object.fromEntries(fromPage)).toEqual(Object.fromEntries(fromMetrics));
  });
});

const DOCS = join(process.cwd(), 'docs');
const pages = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? pages(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
  );

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>();
  for (const m of markdown.matchAll(/^#{1,6} (.+)$/gm)) {
    out.add(
      m[1]!
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    );
  }
  return out;
}

describe('docs/ as a whole', () => {
  it('imports from audio-proxy only what src/index.ts exports', () => {
    const names = new Set<string>();
    for (const file of pages(DOCS)) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/import \{([^}]+)\} from 'audio-proxy'/g)) {
        for (const name of m[1]!.split(',')) names.add(name.replace(/^\s*type\s+/, '').trim());
      }
    }
    expect(names.size).toBeGreaterThan(5);
    const exported = new Set(Object.keys(publicSurface));
    expect([...names].filter((n) => n !== '' && !exported.has(n))).toEqual([]);
  });

  it('links only to pages and headings that exist', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of pages(DOCS)) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue; // an external URL
        const [path, anchor] = target.split('#');
        const resolved = path ? normalize(join(dirname(file), path)) : file;
        checked++;
        let content: string;
        try {
          content = readFileSync(resolved, 'utf8');
        } catch {
          broken.push(`${file}: ${target}`);
          continue;
        }
        if (anchor && !anchors(content).has(anchor)) broken.push(`${file}: ${target} (no heading)`);
      }
    }
    expect(checked).toBeGreaterThan(10);
    expect(broken).toEqual([]);
  });
});
