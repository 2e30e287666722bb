/**
 * The telemetry catalogue: every `node:diagnostics_channel` name audio-proxy publishes, as data,
 * and the one helper that forwards an actor's emitted `telemetry` events onto those channels.
 * A consumer attaching to everything reads these lists rather than restating the names, so a new
 * event reaches it without an edit.
 *
 * ## Invariants
 * - **The names are the contract**: `audio_proxy.<source>.<event>`, exactly as listed here.
 * - **Publishing costs one property read when nobody listens**: `hasSubscribers` is checked
 *   before a message object is built.
 * - **Telemetry never breaks the publisher**: a subscriber that throws is reported by Node on
 *   the next tick (diagnostics_channel's own rule) and the actor goes on.
 *
 * ## Races
 * - *Subscriber attaches mid-run*: channels are looked up once per name and cached; Node keeps
 *   the channel object alive while it has subscribers, so a late subscriber sees later events.
 *
 * ## Events
 * | Channel | Message | When |
 * |---|---|---|
 * | `audio_proxy.semaphore.*` | `{ measurements, metadata }` (see `machines/semaphore.ts`) | slot and queue changes, counts after the event |
 * | `audio_proxy.probe_limiter.*` | `{ measurements, metadata }` (see `machines/probeLimiter.ts`) | probe slot changes, counts after the event |
 * | `audio_proxy.render.*`, `.cache.lookup`, `.variant_store.write_failure` | published by their owners | the render span, cache lookups, store failures |
 * | `audio_proxy.internal_error` | `{ stage, error, req? }` | an unexpected exception on the request path (logged at error, counted) |
 * | `audio_proxy.variant_store.eviction` | `VariantStoreEviction` | a bounded `file://` store removed a least recently used variant to make room |
 * | `audio_proxy.variant_store.oversize` | `VariantStoreOversize` | a variant larger than that whole bound was not kept (logged once per store, counted each time) |
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { AnyActorRef } from 'xstate';

export const SEMAPHORE_PREFIX = 'audio_proxy.semaphore';
export const PROBE_LIMITER_PREFIX = 'audio_proxy.probe_limiter';

/** Semaphore events, in the order a slot's life produces them. */
export const SEMAPHORE_EVENTS = [
  'acquired',
  'queued',
  'rejected',
  'released',
  'abandoned',
  'displaced',
  'preempted',
] as const;
export const PROBE_LIMITER_EVENTS = ['acquired', 'rejected', 'released'] as const;
export const RENDER_EVENTS = ['start', 'stop', 'exception'] as const;

export const SEMAPHORE_CHANNELS = SEMAPHORE_EVENTS.map((e) => `${SEMAPHORE_PREFIX}.${e}` as const);
export const PROBE_LIMITER_CHANNELS = PROBE_LIMITER_EVENTS.map(
  (e) => `${PROBE_LIMITER_PREFIX}.${e}` as const,
);

/** The request path's channels, by what they report (published by the HTTP layer and the Tee). */
export const RENDER_CHANNELS = {
  start: 'audio_proxy.render.start',
  stop: 'audio_proxy.render.stop',
  exception: 'audio_proxy.render.exception',
  cacheLookup: 'audio_proxy.cache.lookup',
  writeFailure: 'audio_proxy.variant_store.write_failure',
  httpRequest: 'audio_proxy.http.request',
  semaphoreRejected: 'audio_proxy.semaphore.rejected',
  semaphorePreempted: 'audio_proxy.semaphore.preempted',
  internalError: 'audio_proxy.internal_error',
} as const;

/**
 * Where an unexpected exception (a bug, never a client outcome) was caught: a closed set, since
 * it is a metric label. `request`: the handler, outside a render; `render_start`: the hand-off
 * from admission to a running coordinator; `delivery`: streaming a render's messages to a client;
 * `notify`: an actor's message to a participant (a subscriber, a tee, a waiter) threw.
 */
export const INTERNAL_ERROR_STAGES = ['request', 'render_start', 'delivery', 'notify'] as const;
export type InternalErrorStage = (typeof INTERNAL_ERROR_STAGES)[number];

/** The request an internal error happened under, as logged. */
export interface InternalErrorRequest {
  readonly method: string;
  readonly path: string;
  /** The client's `x-request-id`, if it sent one. */
  readonly id?: string;
}

/**
 * Publishes an unexpected exception on `audio_proxy.internal_error` as
 * `{ stage, error, req? }`: the proxy logs it at error level and counts it. Never throws.
 */
export function publishInternalError(
  stage: InternalErrorStage,
  error: unknown,
  req?: InternalErrorRequest,
): void {
  try {
    const channel = diagnosticsChannel.channel(RENDER_CHANNELS.internalError);
    if (channel.hasSubscribers) channel.publish({ stage, error, ...(req ? { req } : {}) });
  } catch {
    // reporting a bug must never become a second one
  }
}

/** A bounded `file://` variant store's own channels (`AP_VARIANT_STORE_MAX_BYTES`). */
export const VARIANT_STORE_CHANNELS = {
  eviction: 'audio_proxy.variant_store.eviction',
  oversize: 'audio_proxy.variant_store.oversize',
} as const;

/** One variant evicted: what it freed, and what the store holds once it is gone. */
export interface VariantStoreEviction {
  readonly key: string;
  /** Bytes freed: the variant's data and metadata files. */
  readonly bytes: number;
  /** Bytes the store holds after this eviction. */
  readonly heldBytes: number;
  readonly maxBytes: number;
}

/** One variant not kept because it alone exceeds the bound. */
export interface VariantStoreOversize {
  readonly key: string;
  /** Bytes seen when the store gave up (at least the bound; not the variant's whole size). */
  readonly bytes: number;
  readonly maxBytes: number;
  /** The first such variant this store met: the one the log reports. */
  readonly first: boolean;
}

/** Every process-supervisor transition (message: `{ pool, from, to, … }`). */
export const WORKER_POOL_TRANSITION_CHANNEL = 'audio_proxy.worker_pool.transition';

/** Every channel name audio-proxy publishes on. */
export const CHANNELS = [
  ...RENDER_EVENTS.map((e) => `audio_proxy.render.${e}` as const),
  RENDER_CHANNELS.cacheLookup,
  RENDER_CHANNELS.writeFailure,
  RENDER_CHANNELS.httpRequest,
  RENDER_CHANNELS.internalError,
  VARIANT_STORE_CHANNELS.eviction,
  VARIANT_STORE_CHANNELS.oversize,
  WORKER_POOL_TRANSITION_CHANNEL,
  ...SEMAPHORE_CHANNELS,
  ...PROBE_LIMITER_CHANNELS,
] as const;
export type ChannelName = (typeof CHANNELS)[number];

/** What an actor emits for `publishTelemetry` to forward. */
export interface TelemetryEmitted {
  readonly type: 'telemetry';
  readonly event: string;
  readonly measurements: Readonly<Record<string, number>>;
  readonly metadata: Readonly<Record<string, unknown>>;
}

/** What a subscriber of a forwarded channel receives. */
export interface TelemetryMessage {
  readonly measurements: Readonly<Record<string, number>>;
  readonly metadata: Readonly<Record<string, unknown>>;
}

const EVENTS_BY_PREFIX: Readonly<Record<string, readonly string[]>> = {
  [SEMAPHORE_PREFIX]: SEMAPHORE_EVENTS,
  [PROBE_LIMITER_PREFIX]: PROBE_LIMITER_EVENTS,
};

const channels = new Map<string, diagnosticsChannel.Channel>();

/** The channel for a catalogued name; an unknown name is a programmer error. */
export function channel(name: ChannelName): diagnosticsChannel.Channel {
  let found = channels.get(name);
  if (found === undefined) {
    if (!(CHANNELS as readonly string[]).includes(name)) {
      throw new TypeError(`unknown telemetry channel ${JSON.stringify(name)}`);
    }
    found = diagnosticsChannel.channel(name);
    channels.set(name, found);
  }
  return found;
}

/** Publishes `message` on `name` if anyone listens; builds nothing otherwise. */
export function publish(name: ChannelName, message: () => unknown): void {
  const target = channel(name);
  if (target.hasSubscribers) target.publish(message());
}

/**
 * The demand side of `publishTelemetry`: whether `<prefix>.<event>` has a subscriber right now.
 * Given to a machine as its `telemetry` input, it lets the machine skip building an event that
 * `publishTelemetry` would drop anyway (the semaphore's hot path emits three per cycle).
 */
export function wantedOn(
  prefix: typeof SEMAPHORE_PREFIX | typeof PROBE_LIMITER_PREFIX,
): (event: string) => boolean {
  const events = EVENTS_BY_PREFIX[prefix];
  if (events === undefined) throw new TypeError(`unknown telemetry prefix ${String(prefix)}`);
  const byEvent = new Map<string, diagnosticsChannel.Channel>(
    events.map((e) => [e, channel(`${prefix}.${e}` as ChannelName)]),
  );
  return (event) => byEvent.get(event)?.hasSubscribers === true;
}

/**
 * Forwards every `telemetry` event `actor` emits to `<prefix>.<event>`. Returns the function
 * that stops forwarding. `prefix` is `SEMAPHORE_PREFIX` or `PROBE_LIMITER_PREFIX`. An event
 * outside that source's catalogue is not published (a parity test keeps machines and catalogue
 * in step; telemetry is not worth crashing an actor for).
 */
export function publishTelemetry(
  actor: AnyActorRef,
  prefix: typeof SEMAPHORE_PREFIX | typeof PROBE_LIMITER_PREFIX,
): () => void {
  const events = EVENTS_BY_PREFIX[prefix];
  if (events === undefined) throw new TypeError(`unknown telemetry prefix ${String(prefix)}`);
  const byEvent = new Map<string, diagnosticsChannel.Channel>(
    events.map((e) => [e, channel(`${prefix}.${e}` as ChannelName)]),
  );
  const subscription = actor.on('telemetry', (emitted: TelemetryEmitted) => {
    const target = byEvent.get(emitted.event);
    if (target === undefined || !target.hasSubscribers) return;
    const message: TelemetryMessage = {
      measurements: emitted.measurements,
      metadata: emitted.metadata,
    };
    target.publish(message);
  });
  return () => subscription.unsubscribe();
}
