/**
 * Live inspection: every actor the proxy creates, streamed to a Stately inspector.
 *
 * `openInspection(option)` turns the `inspect` option of `createAudioProxy` into the observer
 * each `createActor` call receives (XState attaches it to the actor's whole system, so invoked
 * children such as a coordinator's Render are covered too). `{ url }` connects a
 * `createWebSocketInspector` from `@statelyai/inspect` to a relay (`startInspectorRelay`, which is
 * the library's `createInspectorServer`); a function or observer is handed XState's raw events.
 *
 * ## Invariants
 * - **Not inspecting costs nothing**: no option, no observer, and the actors are created exactly
 *   as before.
 * - **What goes on the wire is small, plain data.** Contexts and events are copied to JSON-safe
 *   values on the spot, bytes as their length (a coordinator's backlog would otherwise be
 *   re-sent as arrays of numbers on every chunk), actor refs as `{ xstate$$type, id }`.
 * - **A proxy that asked for `{ url }` either is connected or did not start**: an unreachable
 *   relay is `ERR_INSPECTOR_UNREACHABLE` before any actor exists.
 * - **`close()` leaves no socket and no timer behind**, unless the socket failed mid-run: the
 *   library then has a retry pending that nothing can cancel (a relay that stops cleanly is fine).
 *
 * ## Races
 * - *Closing while the socket is still connecting*: the library retries a socket that errors
 *   (every 5 s, forever), and closing a connecting socket is an error. So `openInspection` only
 *   resolves once the socket is open, after a plain TCP probe of the relay (a refused probe
 *   starts no socket, hence no retry loop).
 * - *Snapshots mutated after the fact* (some charts update their context in place): events are
 *   converted synchronously, when XState reports them, not on a later tick.
 *
 * ## Events
 * | XState inspection event | Sent to the relay as |
 * |---|---|
 * | `@xstate.actor` | `@xstate.actor` with the chart's definition (drawn by the viewer) |
 * | `@xstate.event` | `@xstate.event` (plain copy of the event) |
 * | `@xstate.snapshot` | `@xstate.snapshot` (`status`, `value`, plain `context`, `output`) |
 * | `@xstate.action`, `@xstate.microstep` | dropped (the viewer does not use them) |
 */
import { connect, createServer } from 'node:net';
import {
  createInspector,
  createWebSocketInspector,
  type StatelyInspectionEvent,
} from '@statelyai/inspect';
import { createInspectorServer } from '@statelyai/inspect/server';
import type { AnyActorRef, InspectionEvent, Observer } from 'xstate';

/** How long `openInspection` waits for the relay's socket to open. */
export const INSPECTOR_CONNECT_TIMEOUT_MS = 5_000;
/** How long `startInspectorRelay` waits for the relay to accept connections. */
export const RELAY_LISTEN_TIMEOUT_MS = 5_000;
/** Nesting kept when contexts and events are copied; deeper values read "…". */
export const INSPECT_DEPTH_LIMIT = 6;
/** Items kept per array, map or set; enough to see a queue, bounded for a long one. */
export const INSPECT_ITEMS_LIMIT = 50;
/** The relay's port when none is given: the library's own default, which its page assumes. */
export const DEFAULT_INSPECTOR_PORT = 8080;

/** XState's own inspection callback: a function or an observer. */
export type InspectObserver = Observer<InspectionEvent> | ((event: InspectionEvent) => void);

/**
 * `{ url }`: a Stately WebSocket relay (e.g. `ws://127.0.0.1:8080`); the proxy connects to it
 * and sends plain, bounded events. A function or observer: XState's raw inspection events, as
 * `createActor(logic, { inspect })` would deliver them.
 */
export type InspectOption = { readonly url: string } | InspectObserver;

export interface Inspection {
  /** What every `createActor` gets; undefined when not inspecting. */
  readonly observer: InspectObserver | undefined;
  /** Disconnects from the relay (nothing to do for a caller's own observer). */
  close(): void;
}

export class InspectError extends Error {
  readonly code: 'ERR_INSPECTOR_UNREACHABLE';
  constructor(code: 'ERR_INSPECTOR_UNREACHABLE', message: string) {
    super(message);
    this.name = 'InspectError';
    this.code = code;
  }
}

const NOT_INSPECTING: Inspection = { observer: undefined, close: () => {} };

/** Checks `option` at the boundary and connects when it names a relay. */
export async function openInspection(option: InspectOption | undefined): Promise<Inspection> {
  if (option === undefined) return NOT_INSPECTING;
  if (typeof option === 'function') return { observer: option, close: () => {} };
  if (typeof option !== 'object' || option === null) {
    throw new TypeError('inspect must be { url }, a function or an observer');
  }
  if ('url' in option) return connectRelay(option.url);
  if (typeof (option as Observer<InspectionEvent>).next === 'function') {
    return { observer: option, close: () => {} };
  }
  throw new TypeError('inspect must be { url }, a function or an observer');
}

interface LibrarySocket {
  readyState: number;
  addEventListener(type: 'open' | 'error', listener: () => void, options?: { once: boolean }): void;
  removeEventListener(type: 'open' | 'error', listener: () => void): void;
}

async function connectRelay(url: unknown): Promise<Inspection> {
  if (typeof url !== 'string') throw new TypeError('inspect.url must be a string');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`inspect.url is not a URL: ${url}`);
  }
  if (parsed.protocol !== 'ws:' && parsed.protocol !== 'wss:') {
    throw new TypeError(`inspect.url must be ws:// or wss://, got ${parsed.protocol}`);
  }
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  const port = Number(parsed.port || (parsed.protocol === 'wss:' ? 443 : 80));
  if (!(await accepts(host, port, INSPECTOR_CONNECT_TIMEOUT_MS))) {
    throw new InspectError('ERR_INSPECTOR_UNREACHABLE', `no inspector relay answers at ${url}`);
  }
  const inspector = createWebSocketInspector({ url, autoStart: false });
  inspector.start();
  // The adapter's socket is not public; it is the only way to know the connection is up.
  const socket = (inspector.adapter as unknown as { ws?: LibrarySocket }).ws;
  if (socket) await opened(socket, url);
  const convert = converter();
  return {
    observer: (event: InspectionEvent) => {
      const out = convert(event);
      if (out) inspector.adapter.send(out);
    },
    close: () => inspector.stop(),
  };
}

function opened(socket: LibrarySocket, url: string): Promise<void> {
  if (socket.readyState === 1) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      socket.removeEventListener('open', onOpen);
      socket.removeEventListener('error', onError);
    };
    const onOpen = () => {
      done();
      resolve();
    };
    const onError = () => {
      done();
      reject(new InspectError('ERR_INSPECTOR_UNREACHABLE', `the relay at ${url} refused`));
    };
    const timer = setTimeout(onError, INSPECTOR_CONNECT_TIMEOUT_MS);
    socket.addEventListener('open', onOpen, { once: true });
    socket.addEventListener('error', onError, { once: true });
  });
}

/** Whether a TCP connection to host:port succeeds within `timeoutMs`. */
function accepts(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

// ---------------------------------------------------------------------------------------------
// Conversion: XState's inspection events → the relay's plain events.

/** The protocol version the library stamps on its events, read from the library itself. */
function libraryVersion(): string {
  let version = '';
  createInspector({
    send: (e) => {
      version = e._version;
    },
  }).actor('version');
  return version;
}

interface InspectedRef {
  readonly id: string;
  readonly sessionId: string;
  readonly _parent?: InspectedRef;
  readonly logic?: { config?: { id?: string } };
  getSnapshot(): unknown;
}

/** Copies `value` into JSON-safe data, bounded in depth and breadth. */
export function plain(value: unknown, depth = INSPECT_DEPTH_LIMIT): unknown {
  if (value === null || value === undefined) return value ?? null;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : String(value);
    case 'bigint':
    case 'symbol':
      return String(value);
    case 'function':
      return { type: value.name || 'anonymous' };
  }
  if (value instanceof Uint8Array) return { bytes: value.byteLength };
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Error) return { name: value.name, message: value.message };
  if (isActorRef(value)) return { xstate$$type: 1, id: value.id };
  if (depth <= 0) return '…';
  const items = (list: Iterable<unknown>) => {
    const out: unknown[] = [];
    for (const item of list) {
      if (out.length === INSPECT_ITEMS_LIMIT) {
        out.push('…');
        break;
      }
      out.push(plain(item, depth - 1));
    }
    return out;
  };
  if (Array.isArray(value) || value instanceof Set) return items(value);
  if (value instanceof Map) {
    const out: Record<string, unknown> = {};
    let n = 0;
    for (const [k, v] of value) {
      if (n++ === INSPECT_ITEMS_LIMIT) {
        out['…'] = `${value.size - INSPECT_ITEMS_LIMIT} more`;
        break;
      }
      out[typeof k === 'string' ? k : String(plain(k, 0))] = plain(v, depth - 1);
    }
    return out;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = plain(v, depth - 1);
  return out;
}

function isActorRef(value: object): value is InspectedRef {
  return (
    typeof (value as { sessionId?: unknown }).sessionId === 'string' &&
    typeof (value as { send?: unknown }).send === 'function'
  );
}

function snapshotOf(snapshot: unknown): Record<string, unknown> {
  const s = (snapshot ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = { status: s.status ?? 'active' };
  if ('value' in s) out.value = plain(s.value);
  if ('context' in s) out.context = plain(s.context);
  if (s.output !== undefined) out.output = plain(s.output);
  if (s.error !== undefined) out.error = plain(s.error);
  return out;
}

/** XState reports an actor before its first snapshot exists; the first `xstate.init` follows. */
function initialSnapshot(ref: InspectedRef): unknown {
  try {
    return ref.getSnapshot();
  } catch {
    return { status: 'active' };
  }
}

function converter(): (event: InspectionEvent) => StatelyInspectionEvent | undefined {
  const version = libraryVersion();
  const definitions = new WeakMap<object, string | undefined>();
  let seq = 0;
  const base = (event: InspectionEvent) => ({
    sessionId: event.actorRef.sessionId,
    rootId: event.rootId,
    createdAt: Date.now().toString(),
    id: `${++seq}`,
    _version: version,
  });
  const definitionOf = (ref: InspectedRef) => {
    const config = ref.logic?.config;
    if (!config || typeof config !== 'object') return undefined;
    if (!definitions.has(config)) {
      let text: string | undefined;
      try {
        text = JSON.stringify(config, (_k, v) =>
          typeof v === 'function' ? { type: v.name || 'inline' } : v,
        );
      } catch {
        text = undefined; // a definition that cannot be drawn is left out, not fatal
      }
      definitions.set(config, text);
    }
    return definitions.get(config);
  };
  return (event) => {
    switch (event.type) {
      case '@xstate.actor': {
        const ref = event.actorRef as unknown as InspectedRef;
        const configId = ref.logic?.config?.id;
        return {
          type: '@xstate.actor',
          ...base(event),
          name: ref.id !== ref.sessionId ? ref.id : (configId ?? ref.sessionId),
          definition: definitionOf(ref),
          parentId: ref._parent?.sessionId,
          snapshot: snapshotOf(initialSnapshot(ref)),
        };
      }
      case '@xstate.event':
        return {
          type: '@xstate.event',
          ...base(event),
          event: plain(event.event) as { type: string },
          sourceId: (event.sourceRef as AnyActorRef | undefined)?.sessionId,
        };
      case '@xstate.snapshot':
        return {
          type: '@xstate.snapshot',
          ...base(event),
          event: plain(event.event) as { type: string },
          snapshot: snapshotOf(event.snapshot) as never,
        };
      default:
        return undefined;
    }
  };
}

// ---------------------------------------------------------------------------------------------
// The relay.

export interface InspectorRelay {
  readonly port: number;
  /** The proxy side: pass as `inspect: { url: relay.wsUrl }`. */
  readonly wsUrl: string;
  /** The relay's page: Stately's hosted viewer in a frame (needs internet). */
  readonly viewerUrl: string;
  stop(): void;
}

/**
 * Starts `createInspectorServer` (no browser opened) and resolves once it accepts connections.
 * `port: 0` picks a free port (the library cannot report the one it bound). The library listens
 * on every interface, not only loopback.
 */
export async function startInspectorRelay(
  options: { port?: number } = {},
): Promise<InspectorRelay> {
  const wanted = options.port ?? DEFAULT_INSPECTOR_PORT;
  if (!Number.isInteger(wanted) || wanted < 0 || wanted > 65_535) {
    throw new RangeError(`inspector port must be an integer from 0 to 65535, got ${wanted}`);
  }
  // Bound once here first: a taken port is an error to report, not the library's crash.
  const port = await reserve(wanted);
  const server = createInspectorServer({ port, autoOpen: false });
  const deadline = Date.now() + RELAY_LISTEN_TIMEOUT_MS;
  while (!(await accepts('127.0.0.1', port, 500))) {
    if (Date.now() > deadline) {
      server.stop();
      throw new InspectError('ERR_INSPECTOR_UNREACHABLE', `the relay did not start on ${port}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    port,
    wsUrl: `ws://127.0.0.1:${port}`,
    viewerUrl: `http://localhost:${port}`,
    stop: () => server.stop(),
  };
}

/** Binds `port` (0: any) on every interface, as the relay will, and frees it; the port bound. */
function reserve(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(port, () => {
      const bound = (probe.address() as { port: number }).port;
      probe.close(() => resolve(bound));
    });
  });
}
