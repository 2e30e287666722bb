/**
 * The live view of the actors, for the metrics listener only: `GET /debug/actors` (the page),
 * `GET /debug/actors/events` (Server-Sent Events) and `GET /debug/actors/charts` (the chart
 * models as JSON). It owns the SSE clients, the inspection subscriptions on the watched actors'
 * systems, and the diagnostics-channel subscriptions of the event feed.
 *
 * ## Invariants
 * - **Nobody watching costs (almost) nothing**: inspection observers and channel subscribers
 *   exist only while at least one SSE client is connected. `track` of a coordinator or a
 *   delivery then only puts it in a map, and its ending takes it (and only it) out: O(1).
 * - **An ended actor is not kept**: a tracked actor leaves the set (and its view) when it
 *   completes or fails, so the view never holds a finished render's backlog.
 * - **A client sees a full snapshot, then deltas**: `snapshot` (every live actor, recent feed),
 *   then `actor` (one actor's new view), `gone` (an actor ended) and `feed` (telemetry).
 * - **A state change is sent at once; a details-only change is coalesced** into one flush per
 *   `FLUSH_INTERVAL_MS`, so a render's per-chunk byte counts cannot flood a client.
 * - **A slow client is dropped**, never buffered without bound (`MAX_CLIENT_BUFFER_BYTES`).
 * - **`close()` ends every SSE response** and detaches everything; later requests fall through.
 *
 * ## Races
 * - *Actor created while the first client connects*: `track` after the connect inspects it at
 *   once; one before is found in the set when the snapshot is built. Either way it is seen.
 * - *Actor stopped without a final snapshot* (a child stopped by its parent's exit): no
 *   inspection event says so; the heartbeat and every root's ending prune views whose actor is
 *   no longer active, and announce them `gone`.
 * - *Last client leaves mid-flush*: the flush writes to no one and the views are dropped, to be
 *   rebuilt from the actors (never from stale deltas) when a client comes back.
 *
 * ## Events (SSE)
 * | Event | Data | When |
 * |---|---|---|
 * | `snapshot` | `{ actors: ActorView[], feed: FeedItem[] }` | on connect |
 * | `actor` | `ActorView` | an actor's state changed (at once) or its details did (coalesced) |
 * | `gone` | `{ id }` | the actor reached a final state, failed, or was stopped |
 * | `feed` | `FeedItem` | a message on one of the catalogued diagnostics channels |
 */
import diagnostics from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AnyActorRef, InspectionEvent, StateValue, Subscription } from 'xstate';
import { CHANNELS } from '../telemetry/channels.js';
import { activeStateIds, allCharts, type ChartModel } from './chartModel.js';
import { type Details, detailsOf } from './details.js';
import { renderPage } from './page.js';

/** Details-only changes are batched this long: a readable pace, and bounded work per chunk. */
export const FLUSH_INTERVAL_MS = 150;
/** A comment line this often keeps proxies from closing an idle stream; also prunes. */
export const HEARTBEAT_INTERVAL_MS = 10_000;
/** Feed items kept for a new client's snapshot. */
export const FEED_HISTORY = 50;
/** Feed items sent per flush; the rest are counted as dropped. */
export const FEED_MAX_PER_FLUSH = 40;
/** A client whose socket holds more than this unsent is too slow to follow: it is dropped. */
export const MAX_CLIENT_BUFFER_BYTES = 1 << 20;
/** The browser reconnects after this long if the stream breaks. */
export const SSE_RETRY_MS = 2_000;

export const LIVE_VIEW_PATH = '/debug/actors';

export interface ActorView {
  readonly id: string;
  /** The chart (machine id) it runs. */
  readonly chart: string;
  readonly label: string;
  /** The id of the tracked actor it is a child of, or null. */
  readonly parent: string | null;
  readonly status: string;
  /** `rendering.streaming`; parallel regions joined by `, `. */
  readonly value: string;
  /** Active state node ids, root first. */
  readonly active: readonly string[];
  readonly details: Details;
}

export interface FeedItem {
  readonly channel: string;
  /** Wall clock, ms since the epoch. */
  readonly at: number;
  readonly data: Record<string, string | number | boolean | null>;
}

export interface LiveViewOptions {
  /** Long-lived actors, watched from the start: `semaphore`, `pool:render`… */
  readonly actors: readonly { readonly name: string; readonly actor: AnyActorRef }[];
  /** @default every chart in `CHART_MACHINES` */
  readonly charts?: readonly ChartModel[];
  /** Wall clock for feed timestamps. @default Date.now */
  readonly now?: () => number;
  /** @default FLUSH_INTERVAL_MS */
  readonly flushIntervalMs?: number;
  /** @default HEARTBEAT_INTERVAL_MS */
  readonly heartbeatIntervalMs?: number;
}

export interface LiveView {
  /** Adds a short-lived actor (a coordinator), named `<chart>:<key>`. */
  track(actor: AnyActorRef, name: string): void;
  /** Answers `/debug/actors*` (GET/HEAD); false when `path` is not its route. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): boolean;
  /** SSE clients connected now. */
  readonly clients: number;
  /** Ends every stream and detaches from every actor and channel. */
  close(): void;
}

interface Root {
  readonly name: string;
  /** Given at construction (semaphore, pools…): kept even while not started or stopped. */
  readonly longLived: boolean;
  sub: Subscription | null;
}

/** `{ a: { b: 'c' }, d: 'e' }` → `a.b.c, d.e`. */
export function valueString(value: StateValue): string {
  if (typeof value === 'string') return value;
  const parts: string[] = [];
  for (const [key, sub] of Object.entries(value)) {
    if (sub === undefined || (typeof sub === 'object' && Object.keys(sub).length === 0)) {
      parts.push(key);
    } else {
      for (const leaf of valueString(sub as StateValue).split(', ')) parts.push(`${key}.${leaf}`);
    }
  }
  return parts.join(', ');
}

/** A feed message flattened two levels deep, primitives only, strings cut. */
function feedData(message: unknown): FeedItem['data'] {
  const out: FeedItem['data'] = {};
  const put = (prefix: string, value: unknown, depth: number) => {
    if (Object.keys(out).length >= 16) return;
    if (value === null || typeof value === 'number' || typeof value === 'boolean') {
      out[prefix] = value;
    } else if (typeof value === 'string') {
      out[prefix] = value.length > 120 ? `${value.slice(0, 119)}…` : value;
    } else if (typeof value === 'object' && depth < 2 && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value as object)) {
        // measurements/metadata are envelopes: their fields read better unprefixed
        const inner = prefix === '' || prefix === 'measurements' || prefix === 'metadata';
        put(inner ? k : `${prefix}.${k}`, v, depth + 1);
      }
    }
  };
  put('', message, 0);
  return out;
}

function logicId(actor: AnyActorRef): string | undefined {
  const logic = (actor as { logic?: unknown }).logic;
  if (logic === null || typeof logic !== 'object' || !('root' in logic)) return undefined;
  const id = (logic as { id?: unknown }).id;
  return typeof id === 'string' ? id : undefined;
}

const isActive = (actor: AnyActorRef) => actor.getSnapshot()?.status === 'active';

export function createLiveView(options: LiveViewOptions): LiveView {
  const charts = new Map((options.charts ?? allCharts()).map((c) => [c.id, c]));
  const now = options.now ?? Date.now;
  const flushIntervalMs = options.flushIntervalMs ?? FLUSH_INTERVAL_MS;
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS;
  const roots = new Map<AnyActorRef, Root>();
  const views = new Map<AnyActorRef, ActorView>();
  const ids = new WeakMap<AnyActorRef, string>();
  const pending = new Set<AnyActorRef>();
  const clients = new Set<ServerResponse>();
  const feed: FeedItem[] = [];
  let feedQueue: FeedItem[] = [];
  let feedDropped = 0;
  let flushTimer: ReturnType<typeof setTimeout> | null = null;
  let heartbeat: ReturnType<typeof setInterval> | null = null;
  let page: string | null = null;
  let closed = false;
  let seq = 0;

  const idOf = (actor: AnyActorRef) => {
    let id = ids.get(actor);
    if (id === undefined) {
      id = `a${++seq}`;
      ids.set(actor, id);
    }
    return id;
  };

  const viewOf = (actor: AnyActorRef, snapshot: unknown, label: string, parent: string | null) => {
    const chart = charts.get(logicId(actor) ?? '');
    if (chart === undefined) return undefined;
    const s = snapshot as { value: StateValue; status: string; context: unknown };
    const view: ActorView = {
      id: idOf(actor),
      chart: chart.id,
      label,
      parent,
      status: s.status,
      value: valueString(s.value),
      active: activeStateIds(chart, s.value),
      details: detailsOf(chart.id, s.context),
    };
    return view;
  };

  const write = (res: ServerResponse, event: string, data: unknown) => {
    if (res.writableEnded || res.destroyed) {
      clients.delete(res);
      return;
    }
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    if (res.writableLength > MAX_CLIENT_BUFFER_BYTES) {
      clients.delete(res);
      res.destroy();
      if (clients.size === 0) detachAll();
    }
  };
  const broadcast = (event: string, data: unknown) => {
    for (const res of [...clients]) write(res, event, data);
  };

  const scheduleFlush = () => {
    if (flushTimer !== null || clients.size === 0) return;
    flushTimer = setTimeout(flush, flushIntervalMs);
    flushTimer.unref?.();
  };
  function flush() {
    flushTimer = null;
    for (const actor of pending) {
      const view = views.get(actor);
      if (view) broadcast('actor', view);
    }
    pending.clear();
    const items = feedQueue.splice(0, FEED_MAX_PER_FLUSH);
    feedDropped += feedQueue.length;
    feedQueue = [];
    for (const item of items) broadcast('feed', item);
    if (feedDropped > 0) {
      broadcast('feed', { channel: 'live_view.dropped', at: now(), data: { count: feedDropped } });
      feedDropped = 0;
    }
  }

  /** Views of actors that ended without a final snapshot are announced gone. */
  const prune = () => {
    for (const [actor, view] of views) {
      if (isActive(actor)) continue;
      views.delete(actor);
      pending.delete(actor);
      broadcast('gone', { id: view.id });
    }
    for (const [actor, root] of roots) {
      if (root.longLived || isActive(actor)) continue;
      root.sub?.unsubscribe();
      roots.delete(actor);
    }
  };
  /** Short-lived roots that ended (while nobody watched) are dropped. */
  const forgetEnded = () => {
    for (const [actor, root] of roots) {
      if (!root.longLived && !isActive(actor)) roots.delete(actor);
    }
  };

  const update = (actor: AnyActorRef, snapshot: unknown, label: string, parent: string | null) => {
    const view = viewOf(actor, snapshot, label, parent);
    if (view === undefined) return;
    const before = views.get(actor);
    if (view.status !== 'active') {
      views.delete(actor);
      pending.delete(actor);
      broadcast('actor', view);
      broadcast('gone', { id: view.id });
      return;
    }
    views.set(actor, view);
    if (before === undefined || before.value !== view.value) {
      pending.delete(actor);
      broadcast('actor', view);
    } else if (JSON.stringify(before.details) !== JSON.stringify(view.details)) {
      pending.add(actor);
      scheduleFlush();
    }
  };

  const inspect = (root: AnyActorRef, entry: Root) => {
    entry.sub = root.system.inspect((event: InspectionEvent) => {
      if (event.type !== '@xstate.snapshot' || clients.size === 0) return;
      const actor = event.actorRef as AnyActorRef;
      const isRoot = actor === root;
      const label = isRoot ? entry.name : `${entry.name} › ${actor.id}`;
      update(actor, event.snapshot, label, isRoot ? null : idOf(root));
      if (isRoot && (event.snapshot as { status?: string }).status !== 'active') prune();
    });
  };

  /** Every tracked actor and its charted descendants, as they are now. */
  const collect = () => {
    const walk = (actor: AnyActorRef, label: string, parent: string | null, rootName: string) => {
      const snapshot = actor.getSnapshot() as { status?: string; children?: object } | undefined;
      if (snapshot?.status !== 'active') return;
      const view = viewOf(actor, snapshot, label, parent);
      if (view) views.set(actor, view);
      for (const child of Object.values(snapshot.children ?? {}) as AnyActorRef[]) {
        if (child) walk(child, `${rootName} › ${child.id}`, idOf(actor), rootName);
      }
    };
    for (const [actor, root] of roots) walk(actor, root.name, null, root.name);
  };

  const onMessage = (message: unknown, name: string | symbol) => {
    const item: FeedItem = { channel: String(name), at: now(), data: feedData(message) };
    feed.push(item);
    if (feed.length > FEED_HISTORY) feed.shift();
    feedQueue.push(item);
    scheduleFlush();
  };

  const attachAll = () => {
    forgetEnded();
    for (const [actor, root] of roots) inspect(actor, root);
    for (const name of CHANNELS) diagnostics.subscribe(name, onMessage);
    heartbeat = setInterval(() => {
      prune();
      for (const res of [...clients]) {
        if (!res.writableEnded) res.write(': ping\n\n');
      }
    }, heartbeatIntervalMs);
    heartbeat.unref?.();
    collect();
  };

  function detachAll() {
    for (const root of roots.values()) {
      root.sub?.unsubscribe();
      root.sub = null;
    }
    for (const name of CHANNELS) diagnostics.unsubscribe(name, onMessage);
    if (heartbeat !== null) clearInterval(heartbeat);
    if (flushTimer !== null) clearTimeout(flushTimer);
    heartbeat = flushTimer = null;
    views.clear();
    pending.clear();
    feedQueue = [];
    feedDropped = 0;
  }

  for (const { name, actor } of options.actors) {
    roots.set(actor, { name, longLived: true, sub: null });
  }

  const openStream = (req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(`retry: ${SSE_RETRY_MS}\n\n`);
    if (clients.size === 0) attachAll();
    clients.add(res);
    write(res, 'snapshot', { actors: [...views.values()], feed });
    const leave = () => {
      if (!clients.delete(res)) return;
      if (clients.size === 0) detachAll();
    };
    req.on('close', leave);
    res.on('close', leave);
  };

  const send = (
    req: IncomingMessage,
    res: ServerResponse,
    type: string,
    body: string,
    extra: Record<string, string> = {},
  ) => {
    res.writeHead(200, {
      'content-type': type,
      'cache-control': 'no-store',
      'content-length': String(Buffer.byteLength(body)),
      ...extra,
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  };

  return {
    track(actor, name) {
      // An actor that has already ended is never kept (it would not say so again).
      if (closed || roots.has(actor) || !isActive(actor)) return;
      const entry: Root = { name, longLived: false, sub: null };
      roots.set(actor, entry);
      if (clients.size > 0) inspect(actor, entry);
      // Forgotten as soon as it ends, watched or not: a root kept until the next `track` would
      // keep the last ended coordinator (and its backlog) alive for as long as the process.
      // Unwatched, only this one is dropped: O(1) per actor, as one is tracked per request.
      const ended = () => {
        if (roots.get(actor) !== entry) return;
        if (clients.size > 0) prune();
        else roots.delete(actor);
      };
      actor.subscribe({ complete: ended, error: ended });
    },

    handle(req, res, path) {
      if (closed || !(path === LIVE_VIEW_PATH || path.startsWith(`${LIVE_VIEW_PATH}/`))) {
        return false;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') return false;
      const sub = path.slice(LIVE_VIEW_PATH.length).replace(/\/+$/, '');
      if (sub === '') {
        page ??= renderPage([...charts.values()]);
        send(req, res, 'text/html; charset=utf-8', page, {
          // The page is self-contained: nothing may be loaded from anywhere else.
          'content-security-policy':
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
        });
        return true;
      }
      if (sub === '/charts') {
        send(req, res, 'application/json', JSON.stringify([...charts.values()]));
        return true;
      }
      if (sub === '/events') {
        if (req.method === 'HEAD') {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
          res.end();
        } else openStream(req, res);
        return true;
      }
      return false;
    },

    get clients() {
      return clients.size;
    },

    close() {
      if (closed) return;
      closed = true;
      const open = [...clients];
      clients.clear();
      detachAll();
      roots.clear();
      for (const res of open) res.end();
    },
  };
}
