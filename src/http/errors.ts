/**
 * The closed failure taxonomy of the HTTP contract, and the one function that maps a failure to
 * a status, headers and JSON body (`errorResponse`); `renderFailureToHttp` names the row a
 * render's failure (as the coordinator reports it) is answered with.
 *
 * Everything below the HTTP layer reports failures as data (`Failure`); nothing else in the code
 * base picks a status. `ERROR_TABLE` is the same mapping as data, one row per failure class, so a
 * docs parity test can compare the documented error table with the code in both directions.
 *
 * ## Invariants
 * - **Every error body is `{"error":E,"message":M}`** with `Content-Type: application/json` and an
 *   explicit `Cache-Control`, so no CDN default ever decides how long an error lives.
 * - **Cacheability follows the class:** 404/413/415 `max-age=10` (verdicts about current source
 *   bytes), 401/422 `max-age=60` (pure functions of the URL), 501 `max-age=60` (a function of the
 *   URL and the deployed ffmpeg: only a deploy changes it), 410 immutable (an expired URL never
 *   revives), 416/429 and the other 5xx `no-store` (transient, or dependent on a request header).
 * - **The 404 is blind.** Every source refusal renders byte-identically; only the router's own miss
 *   (a path that is not `/{signature}/…`) says `No such resource`; a signed path naming no source
 *   (a signed `/`) is a source refusal.
 * - **`Retry-After` is an integer >= 1** and always comes from the caller's estimate, never invented.
 * - **There is no default row.** An unknown failure type is a programmer error and throws.
 *
 * ## Races
 * None: pure functions.
 *
 * ## Events
 * None.
 */
import type { Failure, FailureCode, RenderFailure } from '../core/failure.js';

export interface ErrorResponse {
  readonly status: number;
  /** Lower-case header names. */
  readonly headers: Readonly<Record<string, string>>;
  /** The encoded JSON body. */
  readonly body: string;
}

export interface ErrorRow {
  readonly type: FailureCode;
  readonly scope?: 'source' | 'route';
  readonly status: number;
  /** The body's `error` value. */
  readonly error: string;
  /** The body's `message`; `undefined` where it names the offending segment (422, 501). */
  readonly message: string | undefined;
  readonly cacheControl: string;
  /** A header this row carries besides the common ones. */
  readonly extraHeader?: 'retry-after' | 'content-range';
}

export const JSON_CONTENT_TYPE = 'application/json';
const CC_SOURCE_VERDICT = 'max-age=10'; // a re-upload changes it; 10 s is the wait after one
const CC_URL_VERDICT = 'max-age=60'; // only a deploy changes it; 60 s bounds that window
const CC_EXPIRED = 'public, max-age=31536000, immutable'; // an expired URL never becomes valid
const CC_TRANSIENT = 'no-store'; // caching a transient failure amplifies it
const MIN_RETRY_AFTER_S = 1; // `Retry-After: 0` invites an immediate retry storm

/** The contract, one row per failure class (two for 404: source and route). */
export const ERROR_TABLE: readonly ErrorRow[] = Object.freeze([
  row('invalid_signature', 401, 'Invalid or missing signature', CC_URL_VERDICT),
  { ...row('not_found', 404, 'Source not found', CC_SOURCE_VERDICT), scope: 'source' },
  { ...row('not_found', 404, 'No such resource', CC_SOURCE_VERDICT), scope: 'route' },
  row('expired', 410, 'URL has expired', CC_EXPIRED),
  row('source_too_large', 413, 'Source exceeds AP_MAX_SRC_BYTES', CC_SOURCE_VERDICT),
  row('source_too_long', 413, 'Source exceeds AP_MAX_DURATION_S', CC_SOURCE_VERDICT),
  row('undecodable_source', 415, 'Source format is not decodable', CC_SOURCE_VERDICT),
  row(
    'video_source',
    415,
    'Source contains video; this proxy serves audio only',
    CC_SOURCE_VERDICT,
  ),
  {
    ...row('range_not_satisfiable', 416, 'Range not satisfiable', CC_TRANSIENT),
    extraHeader: 'content-range',
  },
  row('invalid_options', 422, undefined, CC_URL_VERDICT),
  { ...row('queue_full', 429, 'Render queue is full', CC_TRANSIENT), extraHeader: 'retry-after' },
  row('render_failed', 500, 'Render failed', CC_TRANSIENT),
  row('probe_failed', 500, 'Probe failed', CC_TRANSIENT),
  row('unsupported_option', 501, undefined, CC_URL_VERDICT),
  row('not_configured', 500, 'Storage backend is not configured', CC_TRANSIENT),
  row('upstream_unavailable', 502, 'Storage backend is unavailable', CC_TRANSIENT),
  {
    ...row('shutting_down', 503, 'Server is shutting down', CC_TRANSIENT),
    extraHeader: 'retry-after',
  },
  row('render_timeout', 504, 'Render exceeded AP_RENDER_TIMEOUT', CC_TRANSIENT),
  row('probe_timeout', 504, 'Probe exceeded AP_PROBE_TIMEOUT', CC_TRANSIENT),
]);

function row(
  type: FailureCode,
  status: number,
  message: string | undefined,
  cacheControl: string,
): ErrorRow {
  return { type, status, error: type, message, cacheControl };
}

function encode(error: string, message: string): string {
  return JSON.stringify({ error, message });
}

/**
 * Each row with what is the same in every answer it gives, built once: a burst answers thousands
 * of 429s, each of which would otherwise find its row, encode its body and build its headers.
 */
interface BuiltRow {
  readonly row: ErrorRow;
  /** The body when the row's message is fixed (not a 422's or a 501's). */
  readonly body: string | undefined;
  /** `content-type` and `cache-control`, frozen: rows with no extra header answer with it. */
  readonly headers: Readonly<Record<string, string>>;
  /** `headers` plus `retry-after`, per value of it, built on first use. */
  readonly retryAfter: Map<string, Readonly<Record<string, string>>>;
}

const BUILT_ROWS: ReadonlyMap<string, BuiltRow> = new Map(
  ERROR_TABLE.map((r) => [
    `${r.type}/${r.scope ?? ''}`,
    {
      row: r,
      body: r.message === undefined ? undefined : encode(r.error, r.message),
      headers: Object.freeze({
        'content-type': JSON_CONTENT_TYPE,
        'cache-control': r.cacheControl,
      }),
      retryAfter: new Map(),
    },
  ]),
);
/** Retry-After values kept per row; past this a value's headers are built each time. */
const RETRY_AFTER_KEPT = 64;

function rowFor(failure: Failure): BuiltRow {
  const scope = failure.type === 'not_found' ? (failure.scope ?? 'source') : '';
  const found = BUILT_ROWS.get(`${failure.type}/${scope}`);
  if (found === undefined) {
    throw new TypeError(`unknown failure ${JSON.stringify((failure as { type?: unknown }).type)}`);
  }
  return found;
}

/**
 * The one failure → HTTP mapping. Returns status, headers (`content-type`, `cache-control`, plus
 * `retry-after` for 429 and 503 and `content-range` for 416) and the JSON body.
 */
export function errorResponse(failure: Failure): ErrorResponse {
  const built = rowFor(failure);
  const r = built.row;
  switch (failure.type) {
    case 'invalid_options':
    case 'unsupported_option':
      if (typeof failure.message !== 'string' || failure.message === '') {
        throw new TypeError(`${failure.type} needs the message naming the segment`);
      }
      return { status: r.status, headers: built.headers, body: encode(r.error, failure.message) };
    case 'queue_full':
    case 'shutting_down': {
      const s = failure.retryAfterS;
      if (typeof s !== 'number' || !Number.isFinite(s)) {
        throw new TypeError(`${failure.type} needs retryAfterS (seconds)`);
      }
      const retryAfter = String(Math.max(MIN_RETRY_AFTER_S, Math.ceil(s)));
      let headers = built.retryAfter.get(retryAfter);
      if (headers === undefined) {
        headers = Object.freeze({ ...built.headers, 'retry-after': retryAfter });
        if (built.retryAfter.size < RETRY_AFTER_KEPT) built.retryAfter.set(retryAfter, headers);
      }
      return { status: r.status, headers, body: built.body! };
    }
    case 'range_not_satisfiable':
      if (!Number.isSafeInteger(failure.size) || failure.size < 0) {
        throw new RangeError('range_not_satisfiable needs the variant size in bytes');
      }
      return {
        status: r.status,
        headers: { ...built.headers, 'content-range': `bytes */${failure.size}` },
        body: built.body!,
      };
    default:
      return { status: r.status, headers: built.headers, body: built.body! };
  }
}

/** A render's failure (as its coordinator reports it) → the row of the error table it answers. */
export function renderFailureToHttp(failure: RenderFailure): Failure {
  switch (failure.class) {
    case 'not_found':
      return { type: 'not_found' };
    case 'undecodable':
      return { type: 'undecodable_source' };
    case 'timeout':
      return { type: 'render_timeout' };
    case 'queue_full':
      return { type: 'queue_full', retryAfterS: Math.max(1, failure.retryAfterS ?? 1) };
    default:
      return { type: 'render_failed' };
  }
}
