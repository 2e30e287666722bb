/**
 * Live inspection: every actor the proxy creates, streamed to a Stately inspector.
 *
 * `openInspection(option)` turns the `inspect` option of `createAudioProxy` into the observer
 * each `createActor` call receives (XState attaches it to the actor's whole system, so invoked
 * children such as a coordinator's Render are covered too). `{ url }` connects a
 * `createWebSocketInspector` from `@statelyai/inspect` to a relay (`startInspectorRelay`: the
 * library's `createInspectorServer` rebuilt with closed doors); a function or observer is handed
 * XState's raw events.
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
 * - **No absolute filesystem path goes on the wire**: strings are scrubbed of the directories
 *   `inspectRedactions` names (the local root, the store, the working, home and temp
 *   directories), which read as `<AP_LOCAL_ROOT>/a.wav` and the like.
 * - **The relay is a closed door.** It listens on loopback unless told otherwise
 *   (`--inspector-host`); a WebSocket is accepted only without an `Origin` (a terminal, the
 *   proxy) or from the relay's own page (`http://localhost|127.0.0.1|[::1]|<bound IP>:<port>`),
 *   and only with a `Host` naming the relay by a loopback name or its bound IP, so a web page
 *   elsewhere, or a DNS-rebound name, cannot read the events or the replay of the last
 *   `RELAY_REPLAY_EVENTS`.
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
import { realpathSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { connect, isIP } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import {
  createInspector,
  createWebSocketInspector,
  type StatelyInspectionEvent,
} from '@statelyai/inspect';
import { WebSocket, WebSocketServer } from 'ws';
import type { AnyActorRef, InspectionEvent, Observer } from 'xstate';
import type { Config } from './config/index.js';

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
/** The relay's address when none is given: loopback, because its events describe every request. */
export const DEFAULT_INSPECTOR_HOST = '127.0.0.1';
/** Events the relay replays to a viewer that joins late: the library's own buffer, as documented. */
export const RELAY_REPLAY_EVENTS = 200;
/** The hosted viewer the relay's page frames. */
const STATELY_INSPECTOR_URL = 'https://stately.ai/inspect';
/** Names a browser on this host may use for the relay's page. */
const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

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

/** A directory prefix and the label it reads as on the wire. */
export type Redaction = readonly [prefix: string, label: string];

/**
 * The directories whose absolute paths the relay must not see, for `config`: the local root (as
 * given and resolved), a `file://` store, the working, home and temp directories.
 */
export function inspectRedactions(config: Pick<Config, 'localRoot' | 'variantStore'>): Redaction[] {
  const out: Redaction[] = [];
  const add = (dir: string | undefined, label: string) => {
    if (!dir || dir === '/') return;
    out.push([dir, label]);
    try {
      const real = realpathSync(dir);
      if (real !== dir && real !== '/') out.push([real, label]);
    } catch {
      // gone or unreadable: the given spelling is still scrubbed
    }
  };
  add(config.localRoot, '<AP_LOCAL_ROOT>');
  if (config.variantStore?.kind === 'file') add(config.variantStore.root, '<AP_VARIANT_STORE>');
  add(process.cwd(), '<cwd>');
  add(homedir(), '<home>');
  add(tmpdir(), '<tmp>');
  return out;
}

/** A string scrubber for `redactions`: the longest prefix wins, at a path boundary only. */
export function scrubber(redactions: readonly Redaction[]): ((s: string) => string) | undefined {
  if (redactions.length === 0) return undefined;
  const sorted = [...redactions].sort((a, b) => b[0].length - a[0].length);
  const labels = new Map(sorted.map(([p, l]) => [p.replace(/\/+$/, ''), l]));
  const escaped = [...labels.keys()].map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const pattern = new RegExp(`(${escaped.join('|')})(?=/|$|[^\\w.-])`, 'g');
  return (s) => (s.includes('/') ? s.replace(pattern, (m) => labels.get(m) ?? m) : s);
}

/**
 * Checks `option` at the boundary and connects when it names a relay. `redactions`: directories
 * whose absolute paths are scrubbed from what goes to a relay (`inspectRedactions(config)`).
 */
export async function openInspection(
  option: InspectOption | undefined,
  redactions: readonly Redaction[] = [],
): Promise<Inspection> {
  if (option === undefined) return NOT_INSPECTING;
  if (typeof option === 'function') return { observer: option, close: () => {} };
  if (typeof option !== 'object' || option === null) {
    throw new TypeError('inspect must be { url }, a function or an observer');
  }
  if ('url' in option) return connectRelay(option.url, scrubber(redactions));
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

async function connectRelay(
  url: unknown,
  scrub: ((s: string) => string) | undefined,
): Promise<Inspection> {
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
  const convert = converter(scrub);
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

/**
 * Copies `value` into JSON-safe data, bounded in depth and breadth; every string (keys
 * included) passes through `scrub` when given.
 */
export function plain(
  value: unknown,
  depth = INSPECT_DEPTH_LIMIT,
  scrub?: (s: string) => string,
): unknown {
  if (value === null || value === undefined) return value ?? null;
  const text = (s: string) => (scrub ? scrub(s) : s);
  switch (typeof value) {
    case 'string':
      return text(value);
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
  if (value instanceof Error) return { name: value.name, message: text(value.message) };
  if (isActorRef(value)) return { xstate$$type: 1, id: value.id };
  if (depth <= 0) return '…';
  const items = (list: Iterable<unknown>) => {
    const out: unknown[] = [];
    for (const item of list) {
      if (out.length === INSPECT_ITEMS_LIMIT) {
        out.push('…');
        break;
      }
      out.push(plain(item, depth - 1, scrub));
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
      out[text(typeof k === 'string' ? k : String(plain(k, 0)))] = plain(v, depth - 1, scrub);
    }
    return out;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[text(k)] = plain(v, depth - 1, scrub);
  return out;
}

function isActorRef(value: object): value is InspectedRef {
  return (
    typeof (value as { sessionId?: unknown }).sessionId === 'string' &&
    typeof (value as { send?: unknown }).send === 'function'
  );
}

function snapshotOf(snapshot: unknown, scrub?: (s: string) => string): Record<string, unknown> {
  const s = (snapshot ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = { status: s.status ?? 'active' };
  if ('value' in s) out.value = plain(s.value, INSPECT_DEPTH_LIMIT, scrub);
  if ('context' in s) out.context = plain(s.context, INSPECT_DEPTH_LIMIT, scrub);
  if (s.output !== undefined) out.output = plain(s.output, INSPECT_DEPTH_LIMIT, scrub);
  if (s.error !== undefined) out.error = plain(s.error, INSPECT_DEPTH_LIMIT, scrub);
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

function converter(
  scrub?: (s: string) => string,
): (event: InspectionEvent) => StatelyInspectionEvent | undefined {
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
          snapshot: snapshotOf(initialSnapshot(ref), scrub),
        };
      }
      case '@xstate.event':
        return {
          type: '@xstate.event',
          ...base(event),
          event: plain(event.event, INSPECT_DEPTH_LIMIT, scrub) as { type: string },
          sourceId: (event.sourceRef as AnyActorRef | undefined)?.sessionId,
        };
      case '@xstate.snapshot':
        return {
          type: '@xstate.snapshot',
          ...base(event),
          event: plain(event.event, INSPECT_DEPTH_LIMIT, scrub) as { type: string },
          snapshot: snapshotOf(event.snapshot, scrub) as never,
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
  /** The address it listens on. */
  readonly host: string;
  /** The proxy side: pass as `inspect: { url: relay.wsUrl }`. */
  readonly wsUrl: string;
  /** The relay's page: Stately's hosted viewer in a frame (needs internet). */
  readonly viewerUrl: string;
  stop(): void;
}

/** `host` as it appears in a URL's authority (IPv6 in brackets). */
function authority(host: string): string {
  return isIP(host) === 6 ? `[${host}]` : host;
}

/**
 * Starts the relay and resolves once it listens: Stately's `createInspectorServer` (its page, its
 * replay of the last `RELAY_REPLAY_EVENTS`, every message relayed to every other client), on
 * `host` (loopback by default; an IP literal) and with the Origin and Host checks of the essay.
 * `port: 0` picks a free port.
 */
export async function startInspectorRelay(
  options: { port?: number; host?: string } = {},
): Promise<InspectorRelay> {
  const wanted = options.port ?? DEFAULT_INSPECTOR_PORT;
  if (!Number.isInteger(wanted) || wanted < 0 || wanted > 65_535) {
    throw new RangeError(`inspector port must be an integer from 0 to 65535, got ${wanted}`);
  }
  const host = options.host ?? DEFAULT_INSPECTOR_HOST;
  if (isIP(host) === 0) {
    throw new TypeError(`inspector host must be an IP address literal, got ${host}`);
  }
  let port = wanted;
  /** Names the relay may be reached by: loopback ones, and the bound IP itself. */
  const ownHost = (value: string | undefined) => {
    if (value === undefined) return false;
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(value.toLowerCase());
    if (!m) return false;
    if (m[2] !== undefined && Number(m[2]) !== port) return false;
    return LOOPBACK_NAMES.has(m[1]!) || m[1] === authority(host);
  };
  const admitted = (req: IncomingMessage) => {
    if (!ownHost(req.headers.host)) return false;
    const origin = req.headers.origin;
    if (origin === undefined) return true; // not a browser: a terminal, a test, the proxy
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false; // `null` (a sandboxed or file page) and junk
    }
    return url.protocol === 'http:' && url.port === String(port) && ownHost(url.host);
  };
  const page = bridgePage(STATELY_INSPECTOR_URL);
  const server = createServer((req, res) => {
    if (!ownHost(req.headers.host)) {
      res.writeHead(403, { 'content-type': 'text/plain' });
      res.end('forbidden\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(page);
  });
  const wss = new WebSocketServer({ noServer: true });
  const replay: string[] = [];
  wss.on('connection', (ws: WebSocket) => {
    for (const msg of replay) ws.send(msg);
    ws.on('message', (data: unknown) => {
      const msg = String(data);
      replay.push(msg);
      if (replay.length > RELAY_REPLAY_EVENTS) replay.shift();
      for (const client of wss.clients) {
        if (client !== ws && client.readyState === WebSocket.OPEN) client.send(msg);
      }
    });
  });
  server.on('upgrade', (req, socket, head) => {
    if (!admitted(req)) {
      socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new InspectError('ERR_INSPECTOR_UNREACHABLE', `the relay did not start on ${wanted}`),
        ),
      RELAY_LISTEN_TIMEOUT_MS,
    );
    server.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    server.listen(wanted, host, () => {
      clearTimeout(timer);
      resolve();
    });
  });
  port = (server.address() as { port: number }).port;
  const loopback = host === '127.0.0.1' || host === '::1';
  return {
    port,
    host,
    wsUrl: `ws://${authority(host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host)}:${port}`,
    viewerUrl: `http://${loopback || host === '0.0.0.0' || host === '::' ? 'localhost' : authority(host)}:${port}`,
    stop: () => {
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      server.close();
    },
  };
}

/**
 * The relay's page, as the library's: Stately's viewer in a frame, fed every event from the
 * relay's socket (at this page's own host, so it works on whatever address the relay is bound
 * to), posted to the viewer's origin only.
 */
function bridgePage(inspectorUrl: string): string {
  const origin = new URL(inspectorUrl).origin;
  return `<!DOCTYPE html>
<html>
<head>
  <title>Stately Inspector</title>
  <style>
    * { margin: 0; padding: 0; }
    html, body { height: 100%; }
    iframe { width: 100%; height: 100%; border: none; }
  </style>
</head>
<body>
  <iframe id="inspector" src="${inspectorUrl}"></iframe>
  <script>
    const iframe = document.getElementById('inspector');
    const target = ${JSON.stringify(origin)};
    const buffer = [];
    let connected = false;
    window.addEventListener('message', (e) => {
      if (e.origin === target && e.data && e.data.type === '@statelyai.connected') {
        connected = true;
        buffer.forEach((event) => iframe.contentWindow.postMessage(event, target));
        buffer.length = 0;
      }
    });
    const ws = new WebSocket('ws://' + location.host);
    ws.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (connected) iframe.contentWindow.postMessage(data, target);
      else buffer.push(data);
    };
  </script>
</body>
</html>`;
}
