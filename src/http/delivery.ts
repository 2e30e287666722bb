/**
 * The HTTP adapter of the delivery chart (`machines/delivery.ts`): `deliver` subscribes one
 * render request to its variant's coordinator and runs a delivery actor between the two sides.
 * What the coordinator says (the subscribe answer, then `rendering`, `chunk`, `done`, `error`)
 * and what the response does (`close`) become the chart's events; what the chart emits becomes
 * the response's writes. The decisions (which status, when the deadline bites, when to leave
 * the coordinator) are the chart's; this file only translates.
 *
 * ## Invariants
 * - **One actor per render request, stopped when its response ends** (a final state, or
 *   `client.gone` then `stop()`), so the live view and the inspector forget it.
 * - **Messages before the subscribe answer are held** and replayed after the answer's backlog:
 *   no gap and no reordering at the seam.
 * - **A coordinator left before the subscribe call answered is unsubscribed when it answers.**
 * - **A `Range` is the chart's to answer** (`machines/delivery.ts`: the window, 206/416); only a
 *   416 against a length known before the render (an exact WAV, `exactLengthOf`) is answered
 *   here, before subscribing, so it starts no render and takes no slot. The head's status and
 *   `Content-Length`/`Content-Range`/`Accept-Ranges` come from what the chart emits.
 * - **Telemetry once per request** (`audio_proxy.render.stop` or `.exception`), from the chart's
 *   output, when the actor ends; except that a chart ending `ok` has only *ended* the response,
 *   so its event waits for the response's `close`: `ok` (delivered) if the response finished,
 *   every byte handed to the kernel, and `cancelled` if the client left before. `deliver`
 *   settles after the event, so the caller sees a torn response as `res.destroyed`.
 * - **A bug while writing** (an emitted event whose handling threw) is reported on
 *   `audio_proxy.internal_error` (stage `delivery`) and answered 500, or the stream torn down;
 *   a bug in the subscribe call or in an answer the chart asked for ends the delivery and
 *   rejects, so the router reports and answers it.
 *
 * ## Races
 * - *Client leaves while waiting or streaming*: the response's `close` is `client.gone`, which
 *   leaves the coordinator; the coordinator cancels a render nobody else wants.
 * - *Client leaves after the render's last byte was written but before it was sent* (a slow
 *   reader; the bytes wait in Node): the chart is already `done`, the response closes unfinished,
 *   and the request counts as `cancelled`, not delivered.
 * - *close() begins*: a render cancelled at the end of the drain before any byte went out is
 *   `shutdown` for the chart (a 503, not a 500), since `services.stopping()` says so.
 *
 * ## Events
 * | Channel | Fields | When |
 * |---|---|---|
 * | `audio_proxy.cache.lookup` | `status` (`miss`/`coalesced`), `format` | the subscribe call found a render |
 * | `audio_proxy.render.start` | `format`, `source`, `cache_status` | likewise |
 * | `audio_proxy.render.stop` | … `outcome` (`ok`/`cancelled`), `duration`, `bytes` | the response finished (`ok`), or the client left (`cancelled`) |
 * | `audio_proxy.render.exception` | … `class`, `exit_status`, `detail` | the delivery failed |
 */
import diagnostics from 'node:diagnostics_channel';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { type AnyActorRef, createActor } from 'xstate';
import { watch } from '../actors/monitor.js';
import type { RenderFailure } from '../core/failure.js';
import type { RenderRequest, SubscribeOutcome } from '../core/request.js';
import {
  CONSUMER_SLACK_MS,
  DELIVERY_FAULT,
  type DeliveryEmitted,
  type DeliveryEvent,
  deliveryMachine,
} from '../machines/delivery.js';
import type { SubscriberMessage } from '../machines/renderCoordinator.js';
import { exactLengthOf } from '../services/renderInput.js';
import { RENDER_CHANNELS } from '../telemetry/channels.js';
import { renderFailureToHttp } from './errors.js';
import {
  type Exchange,
  fail,
  reportInternal,
  SHUTTING_DOWN_RETRY_AFTER_S,
  type StageContext,
} from './exchange.js';
import { contentRange, parseRangeWant, resolveRange } from './range.js';
import { tuneSocket } from './socketTuning.js';

let subscriberSeq = 0;

/**
 * Whether a response that has closed reached the kernel whole: it finished while its connection
 * was still up. `writableFinished` alone cannot say: Node emits `finish` (and reports
 * `writableFinished`) for a response whose socket was torn down with bytes still unsent, but a
 * response that really finished closes on the next tick, before its socket can have closed.
 */
export function responseDelivered(res: ServerResponse, socket: Socket | null | undefined): boolean {
  return res.writableFinished && socket?.destroyed !== true;
}

const EMPTY = Buffer.alloc(0);

/**
 * Subscribes `request` and streams it to `x.res` under a delivery actor. Resolves when the
 * delivery has ended (the response answered, torn down or left); rejects on a bug (see above).
 */
export async function deliver(
  x: Exchange,
  ctx: StageContext,
  request: RenderRequest,
  headers: Record<string, string>,
): Promise<void> {
  const { config, services, observers } = ctx;
  const { res } = x;
  const id = `sub-${++subscriberSeq}`;
  const started = performance.now();
  const format = request.options.format;
  const span = { format, source: request.source.canonical };
  let coordinator: AnyActorRef | null = null;
  let left = false;
  let fault: { error: unknown } | null = null;
  let settle!: () => void;
  let reject!: (error: unknown) => void;
  const settled = new Promise<void>((resolve, rejectWith) => {
    settle = resolve;
    reject = rejectWith;
  });

  // The range asked for, and the length when it is known before the render (an exact WAV): a
  // range past that length is refused here, before any slot, probe answer or render is used.
  const range = parseRangeWant(x.req.headers.range);
  const totalBytes = exactLengthOf(request, config);
  if (totalBytes !== undefined && resolveRange(range, totalBytes).type === 'unsatisfiable') {
    fail(x, { type: 'range_not_satisfiable', size: totalBytes });
    return;
  }
  const actor = createActor(deliveryMachine, {
    input: {
      key: request.key,
      deadlineMs: config.renderTimeoutS * 1000 + CONSUMER_SLACK_MS,
      canHandOff: services.cluster !== undefined,
      range,
      ...(totalBytes !== undefined ? { totalBytes } : {}),
    },
    ...(observers.inspect ? { inspect: observers.inspect } : {}),
  });
  const tell = (event: DeliveryEvent) => {
    if (actor.getSnapshot().status === 'active') actor.send(event);
  };
  /** The chart's answer to a question failed: a bug; the router reports and answers it. */
  const faulted = (error: unknown) => {
    if (actor.getSnapshot().status !== 'active') {
      reportInternal(x, error, 'delivery'); // the delivery ended meanwhile: nobody awaits it
      return;
    }
    fault ??= { error };
    tell({ type: 'fault' });
  };
  /** A render cancelled by close() is the node stopping, not a failed render. */
  const stopping = (failure: RenderFailure) =>
    failure.class === 'cancelled' && services.stopping?.() === true;

  const leave = () => {
    if (left) return;
    left = true;
    if (coordinator) void services.unsubscribe(coordinator, id);
  };

  const perform = (e: DeliveryEmitted) => {
    switch (e.type) {
      case 'head': {
        if (res.headersSent) return;
        // A render's listeners share its chunks; the kernel must not copy megabytes per slow one.
        if (res.socket) tuneSocket(res.socket);
        x.cache = e.cache;
        const sized: Record<string, string> = {};
        // A known length or a range answered: ranges are served, say so (as a HIT does).
        if (e.length !== undefined || e.range) sized['accept-ranges'] = 'bytes';
        if (e.length !== undefined) sized['content-length'] = String(e.length);
        if (e.range)
          sized['content-range'] = contentRange(e.range.start, e.range.end, e.range.total);
        res.writeHead(e.range ? 206 : 200, {
          ...headers,
          ...sized,
          'x-audio-proxy': e.cache,
          ...x.cors,
        });
        return;
      }
      case 'refuseRange':
        fail(x, { type: 'range_not_satisfiable', size: e.size });
        return;
      case 'write':
        res.write(e.data);
        return;
      case 'end':
        res.end();
        return;
      case 'refuse':
        fail(x, renderFailureToHttp(e.failure));
        return;
      case 'shuttingDown':
        fail(x, { type: 'shutting_down', retryAfterS: SHUTTING_DOWN_RETRY_AFTER_S });
        return;
      case 'tearDown':
        res.destroy(); // no terminating chunk: the client sees a torn stream
        return;
      case 'leave':
        leave();
        return;
      case 'askRetryAfter':
        services
          .retryAfterS()
          .then((retryAfterS) => tell({ type: 'retryAfter', retryAfterS }), faulted);
        return;
      case 'handOff':
        // A full queue here may be a free slot on a peer: hand the request over before any 429.
        services
          .cluster!.handOff(x.req, res, request.key, e.retryAfterS)
          .then(
            (handed) =>
              tell(
                handed.type === 'relayed'
                  ? { type: 'handOff.relayed' }
                  : { type: 'handOff.refused', retryAfterS: handed.retryAfterS },
              ),
            faulted,
          );
        return;
    }
  };
  /** A bug while delivering: reported, and the response ends; its close ends the delivery. */
  const broken = (error: unknown) => {
    reportInternal(x, error, 'delivery');
    try {
      if (!res.headersSent) fail(x, { type: 'render_failed' });
      else res.destroy();
    } catch {
      res.destroy();
    }
  };
  actor.on('*', (e) => {
    try {
      perform(e as DeliveryEmitted);
    } catch (error) {
      broken(error);
    }
  });

  /** The response's `close`, once it has happened (its watch fires once). */
  let responseClosed = false;
  /** A chart that ended `ok`, waiting for the response's `close` to say if it was delivered. */
  let awaitingClose: (() => void) | null = null;

  /** Publishes the request's one telemetry event and settles `deliver`; `ok`: delivered. */
  const conclude = (meta: Record<string, unknown>, failure: RenderFailure | null, ok: boolean) => {
    const duration = (performance.now() - started) / 1000;
    if (failure === null) {
      diagnostics
        .channel(RENDER_CHANNELS.stop)
        .publish({ ...meta, duration, outcome: ok ? 'ok' : 'cancelled' });
    } else {
      diagnostics.channel(RENDER_CHANNELS.exception).publish({
        ...meta,
        duration,
        class: failure.class,
        exit_status: failure.exitStatus ?? null,
        detail: failure.detail ?? failure.stderrTail ?? '',
      });
    }
    if (fault) reject(fault.error);
    else settle();
  };

  const finish = () => {
    const snapshot = actor.getSnapshot();
    const { cache, bytes } = snapshot.context;
    const output = snapshot.status === 'done' ? snapshot.output : undefined;
    // A chart that threw (a bug) ended like a fault; one stopped before its final state, like a
    // client that left.
    const failure =
      output?.outcome === 'failed'
        ? (output.failure ?? DELIVERY_FAULT)
        : snapshot.status === 'error'
          ? DELIVERY_FAULT
          : null;
    const meta = { ...span, cache_status: cache.toLowerCase(), bytes };
    const ended = () => conclude(meta, null, responseDelivered(res, x.req.socket));
    if (output?.outcome === 'ok' && !responseClosed) {
      // The chart has ended the response; it is delivered once its last byte reaches the kernel,
      // and torn if the client leaves first. Both end in `close` (`responseDelivered` tells).
      awaitingClose = ended;
      return;
    }
    unwatch();
    if (output?.outcome === 'ok') ended();
    else conclude(meta, failure, false);
  };
  actor.subscribe({
    complete: finish,
    error: (error) => {
      broken(error); // the chart itself threw: a bug
      leave();
      finish();
    },
  });

  // Messages that arrive before the subscribe outcome (and its backlog) has been handled are
  // held and replayed after the backlog, so the seam has no gap and no reordering.
  let early: SubscriberMessage[] | null = [];
  const onMessage = (message: SubscriberMessage) => {
    if (early) early.push(message);
    else if (message.type === 'chunk') {
      // Stamped: while streaming, the chart then leaves its deadline's timer running instead of
      // restarting it per chunk (the timers run on this clock).
      tell({ type: 'chunk', data: message.data, at: performance.now() });
    } else
      tell(
        message.type === 'error' && stopping(message.failure)
          ? { type: 'shutdown', failure: message.failure }
          : message,
      );
  };

  // The client leaving at any point ends the delivery; the actor is stopped with the response.
  // After an `ok` final state, the close only tells whether the response finished.
  const unwatch = watch(res, () => {
    responseClosed = true;
    if (awaitingClose) return awaitingClose();
    tell({ type: 'client.gone' });
    actor.stop();
  });

  observers.track?.(actor, `delivery:${id}`);
  actor.start(); // the consumer deadline runs from here
  x.stage = 'render_start';
  let outcome: SubscribeOutcome;
  try {
    outcome = await services.subscribe(request, id, onMessage);
  } catch (error) {
    // Nothing is held on the render side (the service gave back what it took); this request
    // ends here, and the top-level catch reports the bug and answers 500.
    early = null;
    tell({ type: 'fault' });
    throw error;
  }
  x.stage = 'delivery';
  if (outcome.type === 'failed') {
    early = null;
    const { failure } = outcome;
    tell(stopping(failure) ? { type: 'shutdown', failure } : { type: 'refused', failure });
    return settled;
  }
  coordinator = outcome.coordinator;
  if (left || actor.getSnapshot().status !== 'active') {
    // The client left (or the deadline passed) while the call was out: leave now.
    early = null;
    void services.unsubscribe(coordinator, id);
    return settled;
  }
  diagnostics.channel(RENDER_CHANNELS.cacheLookup).publish({ status: outcome.type, format });
  diagnostics.channel(RENDER_CHANNELS.start).publish({ ...span, cache_status: outcome.type });
  const { backlog } = outcome;
  tell({
    type: 'subscribed',
    cache: outcome.type === 'miss' ? 'MISS' : 'COALESCED',
    started: outcome.state !== 'queued',
    backlog: backlog.length > 0 ? Buffer.concat(backlog as Buffer[]) : EMPTY,
    complete: outcome.state === 'completed',
  });
  const held = early;
  early = null;
  for (const message of held) onMessage(message);
  return settled;
}
