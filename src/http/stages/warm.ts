/**
 * `POST /warm` (issue #19): an operator's list of render paths to pre-render into the variant
 * store at a class below `interactive`. The body is JSON, `{ "entries": [{ "path": "/<sig>/...",
 * "class": "low" }] }`; each `path` is exactly what a GET would send, and is checked by the same
 * stages in the same order (signature 401, options 422, expiry 410, what this ffmpeg cannot do
 * 501, source 404, stat 404/413, probe 415/429/504, the admission verdict), each refusal an
 * entry's `invalid(reason)` instead of a response. The answer lists every entry, in order, as
 * `hit`, `started`, `invalid(reason)` or `rejected(reason)` (see `services/warmService.ts`).
 *
 * ## Invariants
 * - **No entry is warmed that a GET of its path would not render**: the stages are the GET's
 *   own, run over a recording response, so the grammar and the signing cannot drift apart.
 * - **`interactive` cannot be spelled**: a class outside `high|normal|low` is `invalid(class)`.
 * - **Bounded before parsing**: a body over `AP_WARM_MAX_ENTRIES` × `ENTRY_BYTES` is a 422 and
 *   is not read further; more than `AP_WARM_MAX_ENTRIES` entries is a 422 and nothing is warmed.
 * - **Without a variant store there is no such route** (404 `No such resource`): warming fills
 *   the store, and a node without one has nothing to warm.
 * - **Entries are checked one after another**, so one warm request probes one source at a time
 *   and cannot fill the probe queue live requests use.
 *
 * ## Races
 * - *The client leaves while its entries are checked*: the entries already handed over are
 *   warmed all the same (the warm service owns them); the answer is not written.
 *
 * ## Events
 * None of its own (the request is counted as endpoint `warm`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Failure } from '../../core/failure.js';
import type { RenderRequest } from '../../core/request.js';
import {
  ANSWERED,
  type Exchange,
  fail,
  JSON_NO_STORE,
  json,
  type StageContext,
  send,
} from '../exchange.js';
import type { WarmRequestEntry } from '../services.js';
import { capabilitiesStage } from './capabilities.js';
import { expiryStage } from './expiry.js';
import { optionsStage } from './options.js';
import { probeGateStage } from './probeGate.js';
import { signatureStage } from './signature.js';
import { sourceStage, statStage } from './source.js';
import { describeVariant } from './variant.js';

/** The body budget per entry: a signed path with every option spelled fits well inside it. */
export const ENTRY_BYTES = 4_096;
/** The classes an entry may name, and the one it gets when it names none. */
export const WARM_ENTRY_CLASSES = ['high', 'normal', 'low'] as const;
export type WarmEntryClass = (typeof WARM_ENTRY_CLASSES)[number];
export const DEFAULT_WARM_CLASS: WarmEntryClass = 'low';

type ValidWarmEntry = WarmRequestEntry;

/** An entry refused before the warm service saw it. */
interface InvalidLine {
  readonly path: string;
  readonly class?: string;
  readonly status: 'invalid';
  readonly reason: string;
}

/** A response that only records what a stage would have answered. */
class Recorded {
  status = 0;
  body = '';
  headersSent = false;
  destroyed = false;
  writeHead(status: number): this {
    this.status = status;
    this.headersSent = true;
    return this;
  }
  setHeader(): this {
    return this;
  }
  end(body?: string | Buffer): this {
    if (body !== undefined) this.body = String(body);
    return this;
  }
  once(): this {
    return this;
  }
  on(): this {
    return this;
  }
  /** `error` of the body, plus its message when it names a segment or a limit. */
  reason(): string {
    try {
      const { error, message } = JSON.parse(this.body) as { error?: string; message?: string };
      if (error === 'invalid_options' || error === 'unsupported_option') {
        return `${error}: ${message}`;
      }
      return error ?? `status ${this.status}`;
    } catch {
      return `status ${this.status}`;
    }
  }
}

/** Checks one path as a GET would be; a render request, or the reason a GET would be refused. */
async function checkEntry(
  x: Exchange,
  ctx: StageContext,
  path: string,
): Promise<{ ok: true; request: RenderRequest } | { ok: false; reason: string }> {
  const recorded = new Recorded();
  const req = { url: path, method: 'GET', headers: {} } as IncomingMessage;
  const ex: Exchange = {
    req,
    res: recorded as unknown as ServerResponse,
    head: false,
    cors: {},
    endpoint: 'warm',
    turns: x.turns,
    stage: 'request',
  };
  const refused = () => ({ ok: false as const, reason: recorded.reason() });
  const rest = signatureStage(ex, ctx, path);
  if (rest === ANSWERED) return refused();
  const parsed = optionsStage(ex, rest, ctx);
  if (parsed === ANSWERED) return refused();
  if (parsed.endpoint !== 'render') return { ok: false, reason: 'not_a_render_path' };
  const nowS = Math.floor(ctx.services.nowMs() / 1000);
  if (expiryStage(ex, parsed.request.exp, nowS) === ANSWERED) return refused();
  if (capabilitiesStage(ex, ctx, parsed) === ANSWERED) return refused();
  const authorised = await sourceStage(ex, ctx, parsed.source);
  if (authorised === ANSWERED) return refused();
  const variant = describeVariant(parsed, authorised.canonical, nowS);
  const resolved = await statStage(ex, ctx, authorised);
  if (resolved === ANSWERED) return refused();
  const probe = await probeGateStage(ex, ctx, resolved, parsed.options);
  if (probe === ANSWERED) return refused();
  return {
    ok: true,
    request: { key: variant.key, options: parsed.options, source: resolved, media: probe.media },
  };
}

/** Reads at most `limit` bytes of the body; `undefined` when it is longer. */
function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!over) resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', reject);
  });
}

const invalidBody = (message: string): Failure => ({
  type: 'invalid_options',
  message: `warm: ${message}`,
});

/** Answers `POST /warm`. */
export async function warmStage(x: Exchange, ctx: StageContext, method: string): Promise<void> {
  x.endpoint = 'warm';
  const warm = ctx.services.warm;
  if (!warm || method !== 'POST') {
    fail(x, { type: 'not_found', scope: 'route' });
    return;
  }
  const max = ctx.config.warmMaxEntries;
  let text: string | undefined;
  try {
    text = await readBody(x.req, max * ENTRY_BYTES);
  } catch {
    return; // the client went away mid-body: nobody to answer
  }
  if (text === undefined) {
    x.res.setHeader('connection', 'close'); // the rest of the body is not read
    fail(x, invalidBody(`body exceeds ${max * ENTRY_BYTES} bytes`));
    return;
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    fail(x, invalidBody('body is not JSON'));
    return;
  }
  const entries = (body as { entries?: unknown } | null)?.entries;
  if (!Array.isArray(entries) || entries.length === 0) {
    fail(x, invalidBody('expected {"entries": [{"path": "...", "class": "low"}, ...]}'));
    return;
  }
  if (entries.length > max) {
    fail(x, invalidBody(`${entries.length} entries; at most ${max} (AP_WARM_MAX_ENTRIES)`));
    return;
  }
  const lines: (InvalidLine | ValidWarmEntry)[] = [];
  for (const raw of entries) {
    const entry = raw as { path?: unknown; class?: unknown } | null;
    const path = typeof entry?.path === 'string' ? entry.path : '';
    if (path === '' || !path.startsWith('/')) {
      lines.push({ path, status: 'invalid', reason: 'path' });
      continue;
    }
    const cls = entry?.class ?? DEFAULT_WARM_CLASS;
    if (typeof cls !== 'string' || !(WARM_ENTRY_CLASSES as readonly string[]).includes(cls)) {
      lines.push({ path, status: 'invalid', reason: 'class' });
      continue;
    }
    const checked = await checkEntry(x, ctx, path);
    if (!checked.ok) {
      lines.push({ path, class: cls, status: 'invalid', reason: checked.reason });
      continue;
    }
    lines.push({ path, class: cls as WarmEntryClass, request: checked.request });
  }
  const valid = lines.filter((l): l is ValidWarmEntry => 'request' in l);
  const reports = await warm.submit(valid);
  let next = 0;
  const answer = lines.map((l) =>
    'request' in l ? { path: l.path, class: l.class, ...reports[next++]! } : l,
  );
  const counts: Record<string, number> = {};
  for (const line of answer) counts[line.status] = (counts[line.status] ?? 0) + 1;
  send(x, 200, { ...JSON_NO_STORE }, json({ entries: answer, counts }));
}
