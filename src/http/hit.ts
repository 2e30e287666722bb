/**
 * Serving a stored variant (a HIT): a 302 to a presigned URL, or the bytes through the proxy with
 * `Content-Length`, `Accept-Ranges` and single-range support. Checked before coalescing and before
 * the source is touched, so a HIT takes no slot and no probe and survives the source's deletion.
 *
 * The caller looks the variant up first (`lookupVariant`), then hands the entry here; the answer
 * is `served` (the response is committed, possibly torn down) or `miss` (nothing was written: the
 * entry vanished between lookup and read, and the caller renders instead).
 *
 * ## Invariants
 * - **Redirect mode answers 302 `no-store`** with a URL valid for `min(AP_PRESIGN_TTL, exp − now)`
 *   seconds. A TTL of 0 (the URL expires this second) or a presign failure is served through the
 *   proxy instead: a HIT is never worse than a render.
 * - **Proxy mode declares the length before the first byte** and sends exactly that many bytes, or
 *   tears the connection down: a short (or long) body never ends as a clean response a client
 *   could cache.
 * - **HEAD mirrors GET** (status, `Content-Length`, `Content-Range`, `Accept-Ranges`) and never
 *   reads the body, so a HEAD never falls back to a render.
 * - **Bodies stream with backpressure**; nothing is loaded whole here (the hot cache, when one
 *   wraps the store, hands over a Buffer it already holds).
 * - **Only a GET that is served counts as a cache lookup** (`audio_proxy.cache.lookup`, hit).
 *
 * ## Races
 * - *Entry deleted between lookup and read*: `get` answers nothing → `miss`, nothing written.
 * - *Client leaves mid-body*: the response closes, the store stream is destroyed (its descriptor
 *   or socket released); nothing else depends on it.
 *
 * ## Events
 * | Channel | Fields | When |
 * |---|---|---|
 * | `audio_proxy.cache.lookup` | `status: 'hit'`, `format` | a GET HIT committed (only if `format` is given) |
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { ServeMode } from '../config/index.js';
import { InFlight } from '../core/inflight.js';
import type { StoredVariant, VariantStore } from '../store/types.js';
import { publish } from '../telemetry/channels.js';
import { errorResponse } from './errors.js';
import { clampCacheControl, clampTtlS } from './expiry.js';
import { contentRange, parseRange } from './range.js';

export type HitOutcome = 'served' | 'miss';

export interface ServeHitOptions {
  readonly store: VariantStore;
  readonly key: string;
  /** What `lookupVariant` returned for `key`. */
  readonly head: StoredVariant;
  /** Already clamped to the URL's `exp`. @default the stored policy, clamped here */
  readonly cacheControl?: string;
  /** The URL's ETag (`"<key>"`). */
  readonly etag: string;
  /** More success headers (lower-case names): the source's surrogate key. */
  readonly extraHeaders?: Readonly<Record<string, string>>;
  /** CORS headers for this response (empty when CORS is off). */
  readonly corsHeaders?: Readonly<Record<string, string>>;
  readonly serveMode: ServeMode;
  /** `AP_PRESIGN_TTL`, seconds. */
  readonly presignTtlS: number;
  /** The URL's expiry (Unix seconds), if it has one. */
  readonly exp?: number;
  /** Now, in Unix seconds (the request's one clock reading). */
  readonly nowS: number;
  /** The variant's format token; when given, a served GET publishes `cache.lookup`. */
  readonly format?: string;
}

/** The variant in `store` under `key`, or undefined. Never throws: an unreachable store is a miss. */
export async function lookupVariant(
  store: VariantStore | undefined,
  key: string,
): Promise<StoredVariant | undefined> {
  if (store === undefined) return undefined;
  let running = lookups.get(store);
  if (running === undefined) lookups.set(store, (running = new InFlight()));
  try {
    return await running.run(key, () => store.head(key));
  } catch {
    return undefined; // the render path still works without the store
  }
}

/** Identical lookups at once (a crowd asking for one variant) share one `head` of the store. */
const lookups = new WeakMap<VariantStore, InFlight<string, StoredVariant | undefined>>();

/** Writes exactly `expected` bytes of `stream` to `res`, or destroys both. */
function pump(stream: Readable, res: ServerResponse, expected: number): Promise<void> {
  return new Promise<void>((resolve) => {
    let sent = 0;
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onFail);
      stream.off('close', onStreamClose);
      res.off('drain', onDrain);
      res.off('close', onResClose);
      resolve();
    };
    const tearDown = () => {
      stream.destroy();
      res.destroy();
      settle();
    };
    const onData = (chunk: Buffer) => {
      if (sent + chunk.length > expected) {
        tearDown();
        return;
      }
      sent += chunk.length;
      if (!res.write(chunk)) stream.pause();
    };
    const onDrain = () => stream.resume();
    const onEnd = () => {
      if (sent !== expected) {
        tearDown();
        return;
      }
      res.end();
      settle();
    };
    const onFail = () => tearDown();
    const onStreamClose = () => {
      // Closed without `end`: destroyed from elsewhere (a socket to the store dropped).
      if (!settled) tearDown();
    };
    const onResClose = () => {
      stream.destroy();
      settle();
    };
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', onFail);
    stream.once('close', onStreamClose);
    res.on('drain', onDrain);
    res.once('close', onResClose);
  });
}

/** Serves `head` from `store` on `res`. See the module note for the contract. */
export async function serveHit(
  req: IncomingMessage,
  res: ServerResponse,
  options: ServeHitOptions,
): Promise<HitOutcome> {
  const { store, key, head, etag, nowS, exp } = options;
  const cors = options.corsHeaders ?? {};
  const isHead = req.method === 'HEAD';

  if (options.serveMode === 'redirect' && store.canPresign) {
    const ttlS = clampTtlS(options.presignTtlS, exp, nowS);
    if (ttlS >= 1) {
      let location: string | undefined;
      try {
        location = await store.presign(key, ttlS);
      } catch {
        location = undefined; // served through the proxy instead
      }
      if (location !== undefined) {
        res.writeHead(302, {
          location,
          'cache-control': 'no-store',
          'x-audio-proxy': 'HIT',
          'content-length': 0,
          ...cors,
        });
        res.end();
        if (!isHead) countHit(options.format);
        return 'served';
      }
    }
  }

  const size = head.size;
  const range = parseRange(req.headers.range, size);
  if (range.type === 'unsatisfiable') {
    const r = errorResponse({ type: 'range_not_satisfiable', size });
    res.writeHead(r.status, {
      ...r.headers,
      'content-length': Buffer.byteLength(r.body),
      ...cors,
    });
    res.end(isHead ? undefined : r.body);
    return 'served';
  }
  const partial = range.type === 'partial' ? { start: range.start, end: range.end } : undefined;
  const length = partial ? partial.end - partial.start + 1 : size;
  const headers: Record<string, string | number> = {
    'content-type': head.contentType,
    'cache-control': options.cacheControl ?? clampCacheControl(head.cacheControl, exp, nowS),
    etag,
    'accept-ranges': 'bytes',
    'content-length': length,
    'x-audio-proxy': 'HIT',
    ...options.extraHeaders,
  };
  if (head.contentDisposition !== undefined) {
    headers['content-disposition'] = head.contentDisposition;
  }
  if (partial) headers['content-range'] = contentRange(partial.start, partial.end, size);
  Object.assign(headers, cors);
  const status = partial ? 206 : 200;

  if (isHead) {
    res.writeHead(status, headers);
    res.end();
    return 'served';
  }
  let body: Awaited<ReturnType<VariantStore['get']>>;
  try {
    body = await store.get(key, partial);
  } catch {
    body = undefined; // unreadable now: render instead
  }
  if (body === undefined) return 'miss';
  if (res.destroyed) {
    if (body.type === 'stream') body.stream.destroy();
    return 'served';
  }
  res.writeHead(status, headers);
  countHit(options.format);
  if (body.type === 'buffer') {
    if (body.data.length === length) {
      res.end(body.data);
    } else {
      // Short (or long): send what there is, then tear down; never a clean end.
      res.write(body.data.subarray(0, length), () => res.destroy());
    }
    return 'served';
  }
  await pump(body.stream, res, length);
  return 'served';
}

function countHit(format: string | undefined): void {
  if (format === undefined) return;
  publish('audio_proxy.cache.lookup', () => ({ status: 'hit', format }));
}
