/**
 * The public listener's request handler: a router over the request stages (`stages/`), one file
 * per stage, in the order the contract fixes. Bytes and outcomes come in from the actors;
 * statuses, headers and bodies go out. Every decision about slots, coalescing and processes is
 * made by an actor; every status comes from `errorResponse` or a stage's success path.
 *
 * Check order for a signed path (each later check can only run if the earlier ones passed):
 * signature 401 → options 422 (404 without a source marker) → expiry 410 → what this ffmpeg
 * cannot do 501 (`stages/capabilities.ts`) → source parse and authorisation 404 → If-None-Match 304 → variant store HIT → stat 404/413 → HEAD describes
 * the MISS and stops → (an `f:hls` playlist: probe gate, then the playlist written from it,
 * `stages/playlist.ts`) → (cluster: a peer's claim relays its answer) → probe gate 415/429/504 →
 * admission verdict 413/415 (`admissionVerdict`: what the encoders cannot take, or longer than
 * `AP_MAX_DURATION_S`) → render slot 429 → stream (the delivery chart, `machines/delivery.ts`).
 *
 * `POST /warm` (only with a variant store; `stages/warm.ts`) checks each entry's path through
 * the same stages a GET runs, and hands the valid ones to the warm service.
 * A `DELETE` is a purge (`stages/purge.ts`): signature (never `insecure`) → the same options and
 * source grammar → the variant deleted from the store and this node's hot cache, and the other
 * nodes told; any other DELETE is the router's 404.
 *
 * The waiting room's endpoints (`/api/v1/queue/*`) issue a ticket only for a join carrying a
 * signed render path, and name sessions only by cookies this process minted (`roomAccess.ts`).
 * A render whose session the room claimed (implicitly or not) sends one `runEnded` when done.
 * An exception no check anticipated (a bug) is reported on `audio_proxy.internal_error` with its
 * stage and the request (logged at error level, counted in `audio_proxy_internal_errors_total`),
 * and answered 500, or the stream torn down when bytes were already sent.
 *
 * ## Invariants
 * - **Each stage answers or hands on, never both** (`ANSWERED`); the router writes nothing
 *   itself but the preflight and the shutdown refusal.
 * - **Between stages the loop turn may be yielded** (`turns.ts`), so a burst cannot hold
 *   `/health` behind thousands of signature checks.
 * - **A HIT starts no actor**; only the render path runs a delivery chart.
 *
 * ## Races
 * - *Client leaves while waiting or streaming*: see `delivery.ts` (the coordinator is left and
 *   cancels a render nobody else wants).
 * - *close() begins*: a request arriving after `stopping()` turns true answers 503
 *   `shutting_down`; one already past that check is drained by the proxy, and if its render is
 *   cancelled at the end of the drain before any byte went out, it is a 503 too, not a 500.
 * - *Silence*: the consumer deadline (`AP_RENDER_TIMEOUT` + 1 s, restarted on every message)
 *   answers 429 before the render started (no slot in time), 504 after it started, and tears the
 *   stream down once bytes have been sent (`machines/delivery.ts`).
 *
 * ## Events
 * | Channel | Fields | When |
 * |---|---|---|
 * | `audio_proxy.http.request` | `endpoint`, `status`, `method`, `url`, `ms`, `bytes`, `cache`, `complete` | every response, at close |
 * | `audio_proxy.internal_error` | `stage`, `error`, `req` | an exception no stage anticipated |
 */

import diagnostics from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config/index.js';
import { RENDER_CHANNELS } from '../telemetry/channels.js';
import { corsHeaders, preflightResponse } from './cors.js';
import { responseDelivered } from './delivery.js';
import {
  ANSWERED,
  type Exchange,
  fail,
  nextStage,
  reportInternal,
  SHUTTING_DOWN_RETRY_AFTER_S,
  type StageContext,
} from './exchange.js';
import type { HandlerObservers, HandlerServices } from './services.js';
import { capabilitiesStage } from './stages/capabilities.js';
import { claimStage } from './stages/cluster.js';
import { expiryStage } from './stages/expiry.js';
import { headStage } from './stages/head.js';
import { healthStage, readyStage } from './stages/health.js';
import { hitStage } from './stages/hit.js';
import { infoStage } from './stages/info.js';
import { notModifiedStage } from './stages/notModified.js';
import { optionsStage } from './stages/options.js';
import { playlistStage } from './stages/playlist.js';
import { prefetchPredicted } from './stages/prefetch.js';
import { probeGateStage } from './stages/probeGate.js';
import { PURGE_SEGMENT, purgeStage } from './stages/purge.js';
import { queueStage } from './stages/queue.js';
import { renderStage } from './stages/render.js';
import { signatureStage } from './stages/signature.js';
import { sourceStage, statStage } from './stages/source.js';
import { describeVariant, isPlaylist } from './stages/variant.js';
import { warmStage } from './stages/warm.js';
import { TurnBudget } from './turns.js';

/**
 * The public handler over `services`; `inspect` and `track`, when given, watch the delivery
 * actors it starts (the proxy's inspect option and live view).
 */
export function createHandler(services: HandlerServices & HandlerObservers) {
  const { inspect, track } = services;
  const observers: HandlerObservers = {
    ...(inspect ? { inspect } : {}),
    ...(track ? { track } : {}),
  };
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
        complete: responseDelivered(res, req.socket),
      });
    });
    try {
      await route(x, { config, services, observers }, method);
    } catch (error) {
      // A bug, not a client outcome: logged at error level and counted; answer 500 if nothing
      // was sent yet, else tear down.
      reportInternal(x, error);
      if (!res.headersSent) fail(x, { type: 'render_failed' });
      else res.destroy(error as Error);
    }
  };
}

/** The shape of a purge's path, `/{signature}/purge/…`: any other DELETE is the router's 404. */
const PURGE_PATH = new RegExp(`^/[^/]+/${PURGE_SEGMENT}/`);

/**
 * Answers the routes that are not a signed path: true (or the answer's promise) when it did,
 * false when `path` is a signed one. Synchronous unless an answer waits, so a HIT pays no turn.
 */
function unsigned(
  x: Exchange,
  ctx: StageContext,
  config: Config,
  path: string,
  method: string,
): boolean | Promise<void> {
  const { services } = ctx;
  if (method === 'OPTIONS' && config.allowOrigin) {
    x.endpoint = 'preflight';
    const pre = preflightResponse(
      config.allowOrigin,
      x.req.headers['access-control-request-headers'],
    )!; // defined: CORS is on
    x.res.writeHead(pre.status, pre.headers);
    x.res.end();
    return true;
  }
  if (services.stopping?.()) {
    if (path === '/health' || path === '/ready')
      x.endpoint = path === '/health' ? 'health' : 'ready';
    x.res.setHeader('connection', 'close'); // a kept-alive client reconnects, elsewhere
    fail(x, { type: 'shutting_down', retryAfterS: SHUTTING_DOWN_RETRY_AFTER_S });
    return true;
  }
  if (path.startsWith('/api/v1/queue/') && services.waitingRoom) {
    return queueStage(x, ctx, path, method);
  }
  if (path === '/warm') return warmStage(x, ctx, method);
  if (method !== 'GET' && method !== 'HEAD' && method !== 'DELETE') {
    fail(x, { type: 'not_found', scope: 'route' });
    return true;
  }
  if (method === 'DELETE') {
    if (PURGE_PATH.test(path)) return false; // a signed purge: verified like any signed path
    fail(x, { type: 'not_found', scope: 'route' });
    return true;
  }
  if (path === '/health') {
    healthStage(x, ctx);
    return true;
  }
  if (path === '/ready') return readyStage(x, ctx);
  if (path === '/metrics' || path === '/debug/actors' || path.startsWith('/debug/actors/')) {
    // Served only on the metrics listener; here it is the router's own miss.
    fail(x, { type: 'not_found', scope: 'route' });
    return true;
  }
  return false;
}

async function route(x: Exchange, ctx: StageContext, method: string): Promise<void> {
  const { config, services } = ctx;
  const rawUrl = x.req.url ?? '/';
  const path = rawUrl.split('?', 1)[0]!;
  const answered = unsigned(x, ctx, config, path, method);
  if (answered !== false) {
    if (answered !== true) await answered;
    return;
  }
  const turn = nextStage(x);
  if (turn) await turn;
  // 1. signature (a purge: never `insecure`)
  const rest = signatureStage(x, ctx, rawUrl, method === 'DELETE');
  if (rest === ANSWERED) return;
  if (method === 'DELETE') {
    await purgeStage(x, ctx, rest);
    return;
  }
  // 2. options (404 without a source marker: the route matched, so it is "Source not found")
  const parsed = optionsStage(x, rest, ctx);
  if (parsed === ANSWERED) return;
  const nowS = Math.floor(services.nowMs() / 1000);
  // 3. expiry
  const exp = parsed.endpoint === 'render' ? parsed.request.exp : undefined;
  if (expiryStage(x, exp, nowS) === ANSWERED) return;
  // 3b. an option this ffmpeg cannot honour: before the source, any probe or slot
  if (capabilitiesStage(x, ctx, parsed) === ANSWERED) return;
  // 4. source parse and authorisation
  const authorised = await sourceStage(x, ctx, parsed.source);
  if (authorised === ANSWERED) return;
  const afterAuthorise = nextStage(x);
  if (afterAuthorise) await afterAuthorise;
  if (parsed.endpoint === 'info') {
    x.endpoint = 'info';
    await infoStage(x, ctx, authorised);
    return;
  }
  x.endpoint = 'render';
  const variant = describeVariant(parsed, authorised.canonical, nowS);
  // 5. conditional request: before any storage access
  if (notModifiedStage(x, variant) === ANSWERED) return;
  // 6. variant store HIT (before the source is touched; no slot, no probe)
  if ((await hitStage(x, ctx, parsed, variant, nowS)) === ANSWERED) return;
  // 7. stat, then HEAD describes a MISS and stops
  const resolved = await statStage(x, ctx, authorised);
  if (resolved === ANSWERED) return;
  if (headStage(x, variant) === ANSWERED) return;
  // 7a. an f:hls playlist is written from the probe: no claim, no slot, nothing stored
  if (isPlaylist(parsed)) {
    const probe = await probeGateStage(x, ctx, resolved, parsed.options);
    if (probe === ANSWERED) return;
    playlistStage(x, ctx, parsed, rawUrl, probe, variant);
    return;
  }
  // 7b. cluster: one render per key across nodes; the claim's owner answers instead of us
  const claim = await claimStage(x, ctx, variant.key);
  if (claim === ANSWERED) return;
  // 8. probe gate and admission verdict
  const probe = await probeGateStage(x, ctx, resolved, parsed.options);
  if (probe === ANSWERED) return;
  // 9. slot and stream (and what this MISS predicts, prefetched at `low`: the next HLS
  // segments; opt-in, the trim that continues this one)
  prefetchPredicted(
    x,
    ctx,
    rest,
    parsed,
    {
      key: variant.key,
      options: parsed.options,
      source: resolved,
      ...(probe.media ? { media: probe.media } : {}),
    },
    authorised.canonical,
  );
  await renderStage(
    x,
    ctx,
    {
      key: variant.key,
      options: parsed.options,
      source: resolved,
      media: probe.media,
      ...(claim?.reservation ? { clusterReservation: claim.reservation } : {}),
    },
    variant.headers,
  );
}
