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
 * - **Telemetry once per request** (`audio_proxy.render.stop` or `.exception`), from the chart's
 *   output, when the actor ends.
 * - **A bug while writing** (an emitted event whose handling threw) is reported on
 *   `audio_proxy.internal_error` (stage `delivery`) and answered 500, or the stream torn down;
 *   a bug in the subscribe call or in an answer the chart asked for ends the delivery and
 *   rejects, so the router reports and answers it.
 *
 * ## Races
 * - *Client leaves while waiting or streaming*: the response's `close` is `client.gone`, which
 *   leaves the coordinator; the coordinator cancels a render nobody else wants.
 * - *close() begins*: a render cancelled at the end of the drain before any byte went out is
 *   `shutdown` for the chart (a 503, not a 500), since `services.stopping()` says so.
 *
 * ## Events
 * | Channel | Fields | When |
 * |---|---|---|
 * | `audio_proxy.cache.lookup` | `status` (`miss`/`coalesced`), `format` | the subscribe call found a render |
 * | `audio_proxy.render.start` | `format`, `source`, `cache_status` | likewise |
 * | `audio_proxy.render.stop` | … `outcome` (`ok`/`cancelled`), `duration`, `bytes` | the delivery ended well or the client left |
 * | `audio_proxy.render.exception` | … `class`, `exit_status`, `detail` | the delivery failed |
 */
import diagnostics from 'node:diagnostics_channel';
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
import { RENDER_CHANNELS } from '../telemetry/channels.js';
import { renderFailureToHttp } from './errors.js';
import {
  type Exchange,
  fail,
  reportInternal,
  SHUTTING_DOWN_RETRY_AFTER_S,
  type StageContext,
} from './exchange.js';
import { tuneSocket } from './socketTuning.js';

let subscriberSeq = 0;

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

  const actor = createActor(deliveryMachine, {
    input: {
      key: request.key,
      deadlineMs: config.renderTimeoutS * 1000 + CONSUMER_SLACK_MS,
      canHandOff: services.cluster !== undefined,
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
      case 'head':
        if (res.headersSent) return;
        // A render's listeners share its chunks; the kernel must not copy megabytes per slow one.
        if (res.socket) tuneSocket(res.socket);
        x.cache = e.cache;
        res.writeHead(200, { ...headers, 'x-audio-proxy': e.cache, ...x.cors });
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

  const finish = () => {
    unwatch();
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
    const duration = (performance.now() - started) / 1000;
    const meta = { ...span, cache_status: cache.toLowerCase(), duration, bytes };
    if (failure === null) {
      diagnostics
        .channel(RENDER_CHANNELS.stop)
        .publish({ ...meta, outcome: output?.outcome === 'ok' ? 'ok' : 'cancelled' });
    } else {
      diagnostics.channel(RENDER_CHANNELS.exception).publish({
        ...meta,
        class: failure.class,
        exit_status: failure.exitStatus ?? null,
        detail: failure.detail ?? failure.stderrTail ?? '',
      });
    }
    if (fault) reject(fault.error);
    else settle();
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
    else
      tell(
        message.type === 'error' && stopping(message.failure)
          ? { type: 'shutdown', failure: message.failure }
          : message,
      );
  };

  // The client leaving at any point ends the delivery; the actor is stopped with the response.
  const unwatch = watch(res, () => {
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
  });
  const held = early;
  early = null;
  for (const message of held) onMessage(message);
  return settled;
}
