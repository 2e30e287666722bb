/**
 * The public listener's request handler: translation only. Bytes and outcomes come in from the
 * actors; statuses, headers and bodies go out. Every decision about slots, coalescing and
 * processes is made by an actor; every status comes from `errorResponse` or the success paths
 * below.
 *
 * Check order for a signed path (each later check can only run if the earlier ones passed):
 * signature 401 → options 422 (404 without a source marker) → expiry 410 → source parse and
 * authorisation 404 → If-None-Match 304 → variant store HIT → HEAD describes and stops → stat
 * 404/413 → probe gate 415/429/504 → admission verdict 413/415 (`admissionVerdict`: what the
 * encoders cannot take, or longer than `AP_MAX_DURATION_S`) → render slot 429 → stream.
 *
 * The waiting room's endpoints (`/api/v1/queue/*`) issue a ticket only for a join carrying a
 * signed render path, and name sessions only by cookies this process minted (`roomAccess.ts`).
 * A render whose session the room claimed (implicitly or not) sends one `runEnded` when done.
 * An exception no check anticipated (a bug) is reported on `audio_proxy.internal_error` with its
 * stage and the request (logged at error level, counted in `audio_proxy_internal_errors_total`),
 * and answered 500, or the stream torn down when bytes were already sent.
 *
 * ## Races
 * - *Client leaves while waiting or streaming*: the response's `close` is watched and becomes a
 *   `gone` for the coordinator, which cancels a render nobody else wants.
 * - *close() begins*: a request arriving after `stopping()` turns true answers 503
 *   `shutting_down`; one already past that check is drained by the proxy, and if its render is
 *   cancelled at the end of the drain before any byte went out, it is a 503 too, not a 500.
 * - *Silence*: the consumer deadline (`AP_RENDER_TIMEOUT` + 1 s, restarted on every message)
 *   answers 429 before the render started (no slot in time), 504 after it started, and tears the
 *   stream down once bytes have been sent.
 */

import diagnostics from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AnyActorRef } from 'xstate';
import type { GoneReason } from '../actors/monitor.js';
import { watch } from '../actors/monitor.js';
import type { Config, ConfigProvider } from '../config/index.js';
import type { Failure, RenderFailure } from '../core/failure.js';
import type { ProbeOutcome, RenderRequest, SubscribeOutcome } from '../core/request.js';
import type { ResolvedSource, Source } from '../core/source.js';
import {
  contentDisposition,
  contentTypeFor,
  IMMUTABLE_CACHE_CONTROL,
} from '../core/variantHeaders.js';
import type { SubscriberMessage } from '../machines/renderCoordinator.js';
import { localEtagMaterial, openLocal, resolveLocal } from '../sources/local.js';
import { authorizeSource, parseSource } from '../sources/parse.js';
import type { VariantStore } from '../store/types.js';
import {
  type InternalErrorRequest,
  type InternalErrorStage,
  publishInternalError,
  RENDER_CHANNELS,
} from '../telemetry/channels.js';
import { admissionVerdict } from '../workers/probe.js';
import { cacheKey, etagOf, ifNoneMatchMatches, infoEtag } from './cacheKey.js';
import { corsHeaders, preflightResponse } from './cors.js';
import { errorResponse } from './errors.js';
import { clampCacheControl, isExpired } from './expiry.js';
import { lookupVariant, serveHit } from './hit.js';
import { parseRoute } from './options.js';
import { joinCredential, SessionCookies, sessionSetCookie } from './roomAccess.js';
import { splitPath, verifySignature } from './signature.js';
import { tuneSocket } from './socketTuning.js';
import { TurnBudget } from './turns.js';

/** Slack past `AP_RENDER_TIMEOUT` before a silent subscription is given up on. */
export const CONSUMER_SLACK_MS = 1_000; // lets the Render's own timeout report first

/** /info cache lifetimes: with an ETag the answer can be revalidated, without one keep it short. */
const INFO_CACHE_CONTROL = 'public, max-age=3600';
const INFO_CACHE_CONTROL_NO_ETAG = 'public, max-age=60';

export type Endpoint = 'render' | 'info' | 'health' | 'ready' | 'metrics' | 'preflight' | 'unknown';

/** What the handler needs from the rest of the system. */
export interface HandlerServices {
  readonly config: ConfigProvider;
  /** Shared with the accept gate, so connections and request stages draw on one budget. */
  readonly turns?: TurnBudget;
  readonly version: string;
  readonly ffmpeg: () => {
    readonly path: string;
    readonly source: string;
    readonly version?: string;
  };
  /** Worker pool supervisors' state for /health (a restart in progress still reads healthy). */
  readonly pools?: () => Record<string, unknown>;
  nowMs(): number;
  ready(): Promise<{ ready: boolean; queued: number; threshold: number }>;
  /** Resolves a remote source to something ffmpeg can open (presigning); local is handled here. */
  resolveRemote?(
    source: Source,
    canonical: string,
    options: { enforceSize: boolean },
  ): Promise<ResolvedSource | { failure: Failure }>;
  /** The variant store (HITs); undefined when AP_VARIANT_STORE is unset. */
  readonly store?: VariantStore;
  probe(source: ResolvedSource): Promise<ProbeOutcome>;
  subscribe(
    request: RenderRequest,
    subscriberId: string,
    onMessage: (message: SubscriberMessage) => void,
  ): Promise<SubscribeOutcome>;
  unsubscribe(coordinator: AnyActorRef, subscriberId: string): Promise<void>;
  retryAfterS(): Promise<number>;
  /** Present when AP_WAITING_ROOM is on. */
  readonly waitingRoom?: WaitingRoomEndpoints;
  /** Present when AP_CLUSTER_REDIS_URL is on (see cluster/cluster.ts). */
  readonly cluster?: ClusterEndpoints;
  /** True once `close()` has begun: every request but a preflight answers 503 `shutting_down`. */
  readonly stopping?: () => boolean;
}

/** A stopping node's Retry-After: another node (or this one restarted) can answer at once. */
export const SHUTTING_DOWN_RETRY_AFTER_S = 1;

/** Where a MISS renders: here under this node's claim, or relayed from the claim's owner. */
export type BeforeRenderOutcome =
  | { readonly type: 'local'; readonly reservation?: string; done(): void }
  | { readonly type: 'relayed' };

/** What the handler needs from cluster mode. Neither call ever fails: Redis trouble is `local`. */
export interface ClusterEndpoints {
  /**
   * Before a MISS renders: claims the key for this node (`local`; `done` runs when the response
   * closes), or relays the answer of the peer that holds the claim (`relayed`).
   */
  beforeRender(
    req: IncomingMessage,
    res: ServerResponse,
    key: string,
  ): Promise<BeforeRenderOutcome>;
  /** The local queue is full: relays a peer's answer, or refuses with the cluster's Retry-After. */
  handOff(
    req: IncomingMessage,
    res: ServerResponse,
    key: string,
    localRetryAfterS: number,
  ): Promise<
    { readonly type: 'relayed' } | { readonly type: 'refused'; readonly retryAfterS: number }
  >;
}

/** What the handler needs from the waiting room (see services/waitingRoomService.ts). */
export interface WaitingRoomEndpoints {
  join(
    session: string,
  ): Promise<{ type: 'ticket'; ticket: unknown } | { type: 'full'; retryAfterS: number }>;
  status(session: string): Promise<{ type: 'ticket'; ticket: unknown } | { type: 'unknown' }>;
  leave(session: string): Promise<{ type: 'left' } | { type: 'unknown' }>;
  /**
   * Starts the session's run: `null` when the room refused it (the render goes on without the
   * room), else the run, with the slot id its render takes over when it held a reservation.
   * Every non-null answer is followed by exactly one `runEnded`.
   */
  claim(session: string): Promise<{ readonly adoptSlotId: string | null } | null>;
  runEnded(session: string, cancelled: boolean): void;
}

/** Session ids are minted and verified under one key per process (see roomAccess.ts). */
const sessions = new SessionCookies();

/** The session a request's cookie names, only if this process issued it. */
function sessionOf(req: IncomingMessage): string | undefined {
  return sessions.read(req.headers.cookie);
}

let subscriberSeq = 0;

function json(body: unknown): string {
  return JSON.stringify(body);
}

interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly head: boolean;
  readonly cors: Record<string, string>;
  endpoint: Endpoint;
  /** Spreads request stages over loop turns under a burst (see `turns.ts`). */
  readonly turns: TurnBudget;
  /** Where an unexpected exception would be reported from (the metric's `stage` label). */
  stage: InternalErrorStage;
  /** The `x-audio-proxy` status sent, for the access log. */
  cache?: 'HIT' | 'MISS' | 'COALESCED';
}

/** A client's `x-request-id` is logged only if it looks like an id (no log injection). */
const REQUEST_ID_SHAPE = /^[\w.:-]{1,128}$/;

function requestOf(req: IncomingMessage): InternalErrorRequest {
  const id = req.headers['x-request-id'];
  return {
    method: req.method ?? 'GET',
    path: (req.url ?? '/').split('?', 1)[0]!,
    ...(typeof id === 'string' && REQUEST_ID_SHAPE.test(id) ? { id } : {}),
  };
}

/** A bug on the request path: logged at error level with the request and counted. */
function reportInternal(x: Exchange, error: unknown, stage: InternalErrorStage = x.stage): void {
  publishInternalError(stage, error, requestOf(x.req));
}

/** Goes on now while the loop turn has budget left, else in a later turn (see `turns.ts`). */
function nextStage(x: Exchange): Promise<void> | undefined {
  return x.turns.pass();
}

function send(
  x: Exchange,
  status: number,
  headers: Record<string, string>,
  body?: string | Buffer,
) {
  const all: Record<string, string | number> = { ...headers, ...x.cors };
  if (headers.vary && x.cors.vary) all.vary = x.cors.vary;
  if (body !== undefined) all['content-length'] = Buffer.byteLength(body);
  x.res.writeHead(status, all);
  x.res.end(x.head ? undefined : body);
}

function fail(x: Exchange, failure: Failure) {
  const r = errorResponse(failure);
  send(x, r.status, { ...r.headers }, r.body);
}

export function createHandler(services: HandlerServices) {
  const turns = services.turns ?? new TurnBudget();
  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const config = services.config.get();
    const method = req.method ?? 'GET';
    const cors = config.allowOrigin ? corsHeaders(config.allowOrigin) : {};
    const x: Exchange = {
      req,
      res,
      head: method === 'HEAD',
      cors,
      endpoint: 'unknown',
      turns,
      stage: 'request',
    };
    const startedMs = performance.now();
    const written = req.socket?.bytesWritten ?? 0; // a kept-alive socket has sent earlier answers
    res.on('close', () => {
      diagnostics.channel(RENDER_CHANNELS.httpRequest).publish({
        endpoint: x.endpoint,
        status: res.statusCode,
        method,
        url: req.url ?? '/',
        ms: performance.now() - startedMs,
        bytes: (req.socket?.bytesWritten ?? written) - written,
        cache: x.cache,
        complete: res.writableFinished,
      });
    });
    try {
      await route(x, config, services, method);
    } catch (error) {
      // A bug, not a client outcome: logged at error level and counted; answer 500 if nothing
      // was sent yet, else tear down.
      reportInternal(x, error);
      if (!res.headersSent) fail(x, { type: 'render_failed' });
      else res.destroy(error as Error);
    }
  };
}

async function route(x: Exchange, config: Config, services: HandlerServices, method: string) {
  const rawUrl = x.req.url ?? '/';
  const path = rawUrl.split('?', 1)[0]!;
  if (method === 'OPTIONS' && config.allowOrigin) {
    x.endpoint = 'preflight';
    const pre = preflightResponse(
      config.allowOrigin,
      x.req.headers['access-control-request-headers'],
    )!; // defined: CORS is on
    x.res.writeHead(pre.status, pre.headers);
    x.res.end();
    return;
  }
  if (services.stopping?.()) {
    if (path === '/health' || path === '/ready')
      x.endpoint = path === '/health' ? 'health' : 'ready';
    x.res.setHeader('connection', 'close'); // a kept-alive client reconnects, elsewhere
    fail(x, { type: 'shutting_down', retryAfterS: SHUTTING_DOWN_RETRY_AFTER_S });
    return;
  }
  if (path.startsWith('/api/v1/queue/') && services.waitingRoom) {
    await queueEndpoint(x, config, services, path, method);
    return;
  }
  if (method !== 'GET' && method !== 'HEAD') {
    fail(x, { type: 'not_found', scope: 'route' });
    return;
  }
  if (path === '/health') {
    x.endpoint = 'health';
    const ffmpeg = services.ffmpeg();
    send(
      x,
      200,
      { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
      json({
        status: 'ok',
        version: services.version,
        ffmpeg,
        ...(services.pools ? { pools: services.pools() } : {}),
      }),
    );
    return;
  }
  if (path === '/ready') {
    x.endpoint = 'ready';
    const r = await services.ready();
    send(
      x,
      r.ready ? 200 : 503,
      { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
      json({ status: r.ready ? 'ready' : 'not_ready', queued: r.queued, threshold: r.threshold }),
    );
    return;
  }
  if (path === '/metrics' || path === '/debug/actors' || path.startsWith('/debug/actors/')) {
    // Served only on the metrics listener; here it is the router's own miss.
    fail(x, { type: 'not_found', scope: 'route' });
    return;
  }
  const turn = nextStage(x);
  if (turn) await turn;
  const split = splitPath(rawUrl);
  if (!split.ok) {
    if (split.reason === 'no_route') fail(x, { type: 'not_found', scope: 'route' });
    else fail(x, { type: 'invalid_signature' });
    return;
  }
  // 1. signature
  const verdict = verifySignature(split.signature, split.rest, {
    key: config.key,
    salt: config.salt,
    allowInsecure: config.allowInsecure,
  });
  if (!verdict.ok) {
    fail(x, { type: 'invalid_signature' });
    return;
  }
  // 2. options (404 without a source marker: the route matched, so it is "Source not found")
  const parsed = parseRoute(split.rest);
  if (!parsed.ok) {
    if (parsed.error === 'not_found') fail(x, { type: 'not_found' });
    else fail(x, { type: 'invalid_options', message: parsed.message });
    return;
  }
  const nowS = Math.floor(services.nowMs() / 1000);
  // 3. expiry
  const exp = parsed.endpoint === 'render' ? parsed.request.exp : undefined;
  if (isExpired(exp, nowS)) {
    fail(x, { type: 'expired' });
    return;
  }
  // 4. source parse and authorisation
  const src = parseSource(parsed.source);
  if (!src.ok) {
    fail(x, { type: 'not_found' });
    return;
  }
  const authorised = await authorizeSource(src.source, {
    allowlist: config.sourceAllowlist,
    localRoot: config.localRoot,
  });
  if (!authorised.ok) {
    fail(x, { type: 'not_found' });
    return;
  }
  const afterAuthorise = nextStage(x);
  if (afterAuthorise) await afterAuthorise;
  if (parsed.endpoint === 'info') {
    x.endpoint = 'info';
    await info(x, config, services, src.source, src.canonical);
    return;
  }
  x.endpoint = 'render';
  const key = cacheKey(parsed.normalized, src.canonical);
  const etag = etagOf(key);
  const cacheControl = clampCacheControl(IMMUTABLE_CACHE_CONTROL, exp, nowS);
  const successHeaders: Record<string, string> = {
    'content-type': contentTypeFor(parsed.options),
    'cache-control': cacheControl,
    etag,
  };
  if (parsed.options.download !== undefined) {
    successHeaders['content-disposition'] = contentDisposition(parsed.options.download);
  }
  // 5. conditional request: before any storage access
  const inm = x.req.headers['if-none-match'];
  if (typeof inm === 'string' && ifNoneMatchMatches(inm, etag)) {
    x.res.writeHead(304, { etag, 'cache-control': cacheControl, ...x.cors });
    x.res.end();
    return;
  }
  // 6. variant store HIT (before the source is touched; no slot, no probe)
  if (services.store) {
    const head = await lookupVariant(services.store, key);
    const afterLookup = nextStage(x);
    if (afterLookup) await afterLookup;
    if (head) {
      x.cache = 'HIT'; // set before: the response may close before serveHit resolves
      const outcome = await serveHit(x.req, x.res, {
        store: services.store,
        key,
        head,
        cacheControl,
        etag,
        corsHeaders: x.cors,
        serveMode: config.serveMode,
        presignTtlS: config.presignTtlS,
        exp,
        nowS,
        format: parsed.options.format,
      });
      if (outcome === 'served') return;
      x.cache = undefined; // the stored copy could not be served: the render path answers
    }
  }
  // 7. HEAD describes a MISS and stops
  // 8. stat
  const resolved = await resolveSource(config, services, src.source, src.canonical, true);
  const afterResolve = nextStage(x);
  if (afterResolve) await afterResolve;
  if ('failure' in resolved) {
    fail(x, resolved.failure);
    return;
  }
  if (x.head) {
    x.cache = 'MISS';
    x.res.writeHead(200, { ...successHeaders, 'x-audio-proxy': 'MISS', ...x.cors });
    x.res.end();
    return;
  }
  // 8b. cluster: one render per key across nodes; the claim's owner answers instead of us
  const routed = services.cluster ? await services.cluster.beforeRender(x.req, x.res, key) : null;
  if (routed?.type === 'relayed') return;
  if (routed) x.res.once('close', () => routed.done());
  // 9. probe gate
  const probe = await services.probe(resolved);
  const afterProbe = nextStage(x);
  if (afterProbe) await afterProbe;
  if (!probe.ok) {
    fail(x, probe.failure);
    return;
  }
  // What the encoders cannot take, or past the output bound, is refused before any slot.
  const probedSize = typeof probe.info.size === 'number' ? probe.info.size : resolved.size;
  const admission = admissionVerdict(probe.media ?? {}, probedSize, config);
  if (!admission.ok) {
    fail(x, { type: admission.reason });
    return;
  }
  if (parsed.options.format === 'peaks' && probe.media?.duration === undefined) {
    // Peaks need the duration to size their buckets; a source without one cannot be drawn.
    fail(x, { type: 'undecodable_source' });
    return;
  }
  // 10. slot and stream (a ready waiting-room ticket hands its reserved slot over)
  // Every claim, implicit ones (no reservation) included, is ended by the `finally` below.
  const session = services.waitingRoom ? sessionOf(x.req) : undefined;
  const claimed = session ? await services.waitingRoom!.claim(session) : null;
  const adoptSlotId = claimed?.adoptSlotId;
  try {
    await deliver(
      x,
      config,
      services,
      {
        key,
        options: parsed.options,
        source: resolved,
        media: probe.media,
        ...(adoptSlotId ? { adoptSlotId } : {}),
        ...(routed?.reservation ? { clusterReservation: routed.reservation } : {}),
      },
      successHeaders,
    );
  } finally {
    if (session && claimed) services.waitingRoom!.runEnded(session, x.res.destroyed);
  }
}

const JSON_NO_STORE = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'no-store',
};

async function queueEndpoint(
  x: Exchange,
  config: Config,
  services: HandlerServices,
  path: string,
  method: string,
) {
  const room = services.waitingRoom!;
  let session = sessionOf(x.req);
  const headers: Record<string, string> = { ...JSON_NO_STORE };
  if (path === '/api/v1/queue/join' && method === 'POST') {
    // Only the operator's credential (a signed render path) takes a ticket: see roomAccess.ts.
    const credential = joinCredential(
      x.req.url ?? '',
      { key: config.key, salt: config.salt, allowInsecure: config.allowInsecure },
      Math.floor(services.nowMs() / 1000),
    );
    if (!credential.ok) {
      fail(x, credential.failure);
      return;
    }
    if (session) {
      // A repeated join is the same ticket (as a poll, it also refreshes the heartbeat).
      const held = await room.status(session);
      if (held.type === 'ticket') {
        send(x, 200, headers, json(held.ticket));
        return;
      }
    }
    // A new ticket always gets a new session: a planted cookie never names the joiner's ticket.
    const minted = sessions.mint();
    session = minted.session;
    headers['set-cookie'] = sessionSetCookie(minted.value, config.cookieSecure);
    const r = await room.join(session);
    if (r.type === 'full') {
      send(
        x,
        429,
        { ...headers, 'retry-after': String(Math.max(1, r.retryAfterS)) },
        json({ error: 'queue_full', message: 'Waiting room is full' }),
      );
      return;
    }
    send(x, 200, headers, json(r.ticket));
    return;
  }
  if (path === '/api/v1/queue/status' && (method === 'GET' || method === 'HEAD')) {
    const r = session ? await room.status(session) : ({ type: 'unknown' } as const);
    if (r.type === 'unknown') {
      send(x, 404, headers, json({ error: 'not_found', message: 'No such ticket' }));
      return;
    }
    send(x, 200, headers, json(r.ticket));
    return;
  }
  if (path === '/api/v1/queue/ticket' && method === 'DELETE') {
    const r = session ? await room.leave(session) : ({ type: 'unknown' } as const);
    if (r.type === 'unknown') {
      send(x, 404, headers, json({ error: 'not_found', message: 'No such ticket' }));
      return;
    }
    x.res.writeHead(204, { 'cache-control': 'no-store', ...x.cors });
    x.res.end();
    return;
  }
  fail(x, { type: 'not_found', scope: 'route' });
}

async function resolveSource(
  config: Config,
  services: HandlerServices,
  source: Source,
  canonical: string,
  enforceSize: boolean,
): Promise<ResolvedSource | { failure: Failure }> {
  if (source.scheme === 'local') {
    const r = await resolveLocal(
      config.localRoot,
      source.path,
      enforceSize ? { maxSrcBytes: config.maxSrcBytes } : {},
    );
    if (!r.ok)
      return {
        failure: { type: r.reason === 'source_too_large' ? 'source_too_large' : 'not_found' },
      };
    const limit = enforceSize ? { maxSrcBytes: config.maxSrcBytes } : {};
    return {
      source,
      canonical,
      input: { url: r.path, kind: 'local' },
      open: () => openLocal(config.localRoot, r.path, limit),
      size: r.size,
      mtimeMs: r.mtimeMs,
    };
  }
  if (!services.resolveRemote) return { failure: { type: 'not_found' } };
  return services.resolveRemote(source, canonical, { enforceSize });
}

async function info(
  x: Exchange,
  config: Config,
  services: HandlerServices,
  source: Source,
  canonical: string,
) {
  const resolved = await resolveSource(config, services, source, canonical, false);
  if ('failure' in resolved) {
    fail(x, resolved.failure);
    return;
  }
  const material =
    resolved.size !== undefined && resolved.mtimeMs !== undefined
      ? localEtagMaterial(resolved.size, resolved.mtimeMs)
      : undefined;
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': material ? INFO_CACHE_CONTROL : INFO_CACHE_CONTROL_NO_ETAG,
  };
  if (material) headers.etag = infoEtag(canonical, material);
  const inm = x.req.headers['if-none-match'];
  if (headers.etag && typeof inm === 'string' && ifNoneMatchMatches(inm, headers.etag)) {
    x.res.writeHead(304, {
      etag: headers.etag,
      'cache-control': headers['cache-control']!,
      ...x.cors,
    });
    x.res.end();
    return;
  }
  if (x.head) {
    x.res.writeHead(200, { ...headers, ...x.cors });
    x.res.end();
    return;
  }
  const probe = await services.probe(resolved);
  if (!probe.ok) {
    fail(x, probe.failure);
    return;
  }
  const body = { ...probe.info };
  if (resolved.size !== undefined) body.size = resolved.size;
  send(x, 200, headers, json(body));
}

/** Failure class from the render pipeline → the error table. */
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

type Phase = 'slot' | 'render' | 'streaming';

async function deliver(
  x: Exchange,
  config: Config,
  services: HandlerServices,
  request: RenderRequest,
  headers: Record<string, string>,
): Promise<void> {
  const id = `sub-${++subscriberSeq}`;
  const { res } = x;
  let phase: Phase = 'slot';
  let wroteBytes = false;
  let finished = false;
  let coordinator: AnyActorRef | null = null;
  let cacheStatus: 'MISS' | 'COALESCED' = 'MISS';
  let bytes = 0;
  const started = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let settle!: () => void;
  const settled = new Promise<void>((r) => {
    settle = r;
  });
  const deadlineMs = config.renderTimeoutS * 1000 + CONSUMER_SLACK_MS;
  const format = request.options.format;
  const span = { format, source: request.source.canonical };

  const finish = (
    outcome: { ok: true; cancelled?: boolean } | { ok: false; failure: RenderFailure },
  ) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    unwatch();
    const duration = (performance.now() - started) / 1000;
    const meta = { ...span, cache_status: cacheStatus.toLowerCase(), duration, bytes };
    if (outcome.ok) {
      diagnostics
        .channel(RENDER_CHANNELS.stop)
        .publish({ ...meta, outcome: outcome.cancelled ? 'cancelled' : 'ok' });
    } else {
      diagnostics.channel(RENDER_CHANNELS.exception).publish({
        ...meta,
        class: outcome.failure.class,
        exit_status: outcome.failure.exitStatus ?? null,
        detail: outcome.failure.detail ?? outcome.failure.stderrTail ?? '',
      });
    }
    settle();
  };

  const startStreaming = () => {
    if (res.headersSent) return;
    // A render's listeners share its chunks; the kernel must not copy megabytes per slow one.
    if (res.socket) tuneSocket(res.socket);
    x.cache = cacheStatus;
    res.writeHead(200, { ...headers, 'x-audio-proxy': cacheStatus, ...x.cors });
    phase = 'streaming';
  };

  const write = (data: Buffer) => {
    if (finished || data.length === 0) return;
    startStreaming();
    wroteBytes = true;
    bytes += data.length;
    res.write(data);
  };

  const failBeforeOrTearDown = (failure: RenderFailure) => {
    if (!wroteBytes && !res.headersSent) {
      // A render cancelled by close() is the node stopping, not a failed render.
      const stopping = failure.class === 'cancelled' && services.stopping?.() === true;
      fail(
        x,
        stopping
          ? { type: 'shutting_down', retryAfterS: SHUTTING_DOWN_RETRY_AFTER_S }
          : renderFailureToHttp(failure),
      );
    } else {
      res.destroy(); // no terminating chunk: the client sees a torn stream
    }
    finish({ ok: false, failure });
  };

  const leave = () => {
    if (coordinator) void services.unsubscribe(coordinator, id);
  };

  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(onDeadline, deadlineMs);
  };

  const onDeadline = () => {
    if (finished) return;
    leave();
    if (phase === 'slot') {
      void services.retryAfterS().then((retryAfterS) => {
        if (finished) return;
        fail(x, { type: 'queue_full', retryAfterS });
        finish({ ok: false, failure: { class: 'queue_full', retryAfterS } });
      });
    } else if (phase === 'render') {
      failBeforeOrTearDown({ class: 'timeout', detail: 'no output before the consumer deadline' });
    } else {
      res.destroy();
      finish({ ok: false, failure: { class: 'timeout', detail: 'stream went silent' } });
    }
  };

  // Messages that arrive before the subscribe outcome (and its backlog) has been handled are
  // held and replayed after the backlog, so the seam has no gap and no reordering.
  let early: SubscriberMessage[] | null = [];
  const onMessage = (message: SubscriberMessage) => {
    try {
      handleMessage(message);
    } catch (error) {
      // A bug while delivering: reported, and the response ends; its close makes us leave.
      reportInternal(x, error, 'delivery');
      try {
        if (!res.headersSent) fail(x, { type: 'render_failed' });
        else res.destroy();
      } catch {
        res.destroy();
      }
    }
  };
  const handleMessage = (message: SubscriberMessage) => {
    if (early) {
      early.push(message);
      return;
    }
    if (finished) return;
    arm();
    switch (message.type) {
      case 'rendering':
        if (phase === 'slot') phase = 'render';
        return;
      case 'chunk':
        write(message.data);
        return;
      case 'done':
        startStreaming();
        res.end();
        finish({ ok: true });
        return;
      case 'error':
        failBeforeOrTearDown(message.failure);
        return;
    }
  };

  // The client leaving at any point is a `gone` for the coordinator (once we have one).
  let clientGone = false;
  const unwatch = watch(res, (reason: GoneReason) => {
    if (finished && reason.type === 'closed' && res.writableFinished) return;
    clientGone = true;
    leave();
    finish({ ok: true, cancelled: true });
  });

  arm();
  x.stage = 'render_start';
  let outcome: SubscribeOutcome;
  try {
    outcome = await services.subscribe(request, id, onMessage);
  } catch (error) {
    // Nothing is held on the render side (the service gave back what it took); this request
    // ends here, and the top-level catch reports the bug and answers 500.
    early = null;
    finish({ ok: false, failure: { class: 'render_failed', detail: 'internal error' } });
    throw error;
  }
  x.stage = 'delivery';
  if (outcome.type === 'failed') {
    early = null;
    if (!finished && outcome.failure.class === 'queue_full' && services.cluster) {
      // A full queue here may be a free slot on a peer: hand the request over before any 429.
      clearTimeout(timer);
      const handed = await services.cluster.handOff(
        x.req,
        res,
        request.key,
        outcome.failure.retryAfterS ?? 1,
      );
      if (handed.type === 'relayed') finish({ ok: true });
      else if (!finished)
        failBeforeOrTearDown({ ...outcome.failure, retryAfterS: handed.retryAfterS });
      return settled;
    }
    if (!finished) failBeforeOrTearDown(outcome.failure);
    return settled;
  }
  coordinator = outcome.coordinator;
  cacheStatus = outcome.type === 'miss' ? 'MISS' : 'COALESCED';
  if (clientGone) {
    early = null;
    leave();
    return settled;
  }
  diagnostics.channel(RENDER_CHANNELS.cacheLookup).publish({ status: outcome.type, format });
  diagnostics.channel(RENDER_CHANNELS.start).publish({ ...span, cache_status: outcome.type });
  if (outcome.state !== 'queued') phase = 'render';
  if (outcome.backlog.length > 0) write(Buffer.concat(outcome.backlog as Buffer[]));
  const held = early;
  early = null;
  for (const message of held) onMessage(message);
  return settled;
}
