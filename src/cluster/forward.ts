/**
 * Forwarding: relays one public request to a peer node and the peer's answer back, byte for
 * byte. Used when a peer owns the key's render claim (the peer answers from its coordinator as a
 * COALESCED stream) and when this node's queue is full (hand-off to a peer with a free slot).
 *
 * ## Invariants
 * - **One hop at most.** Every forwarded request carries `x-ap-forwarded`; a node that receives
 *   a valid one never forwards or hands it off again, so two nodes cannot bounce a request.
 * - **Only a node can say "forwarded".** The hop header is `v1 <nodeId> <ms> <mac>`: an
 *   HMAC-SHA256, under a key derived (HKDF) from the cluster's shared `AP_KEY` and `AP_SALT`, over
 *   the sending node, the time, the method, the path, the receiving node's origin and the
 *   reservation id (the first `AP_KEY`/`AP_SALT` pair signs; during a key rotation every pair's
 *   derived key verifies). `verifiedHop` believes it only when a MAC matches and the time is within
 *   `HOP_VALIDITY_MS`; anything else (a client's own header, a hop replayed to another node, to
 *   another path, later, or with another reservation) is ignored, and the request is served as
 *   if it came straight from a client. The derived key never signs a URL and no URL signature
 *   is a hop MAC (different HMAC keys), so neither can be turned into the other.
 * - **Nothing is sent downstream until the peer answered.** A peer that cannot be reached (or
 *   dies before its status line) is `unreachable`, and the caller still owns an untouched
 *   response: it renders alone instead. A request is never lost to a dead peer.
 * - **A torn upstream tears the downstream**: once the peer's status went out, an upstream that
 *   ends without its terminating chunk destroys the client's socket, so the client sees a torn
 *   stream, never a short body passed off as whole.
 * - **The client leaving aborts the upstream request**, which is the peer's `gone`.
 *
 * ## Races
 * - *Peer answers while the client is leaving*: whichever comes first ends the exchange; the
 *   other finds it settled and only cleans up.
 * - *Slow connect*: bounded by `connectTimeoutMs`; after the socket connects there is no deadline
 *   here, because the peer's own consumer deadline governs how long a render may stay silent.
 *
 * ## Events
 * | Outcome | When |
 * |---|---|
 * | `relayed` (`complete`) | the peer answered; `complete: false` if the body was torn |
 * | `unreachable` | connect refused, timed out, or reset before the status line |
 * | `client_gone` | the client left before the peer answered |
 */
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { Agent, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { request as requestTls } from 'node:https';

/** Marks a request as forwarded once: `v1 <nodeId> <ms> <mac>` (see `hopHeader`). */
export const HOP_HEADER = 'x-ap-forwarded';
/**
 * How far a hop's time may be from the receiver's clock, either way, in ms: a forward reaches
 * its peer in milliseconds, so this is clock skew between nodes plus slack, and the window in
 * which a captured hop could be replayed (same path, same receiver) at all.
 */
export const HOP_VALIDITY_MS = 30_000;
/** Longest hop header accepted, in characters: a node id (128) and a MAC fit in well under it. */
const MAX_HOP_HEADER_CHARS = 512;
/** HKDF context of the hop key: a hop MAC is never a URL signature, nor the reverse. */
const HOP_KEY_INFO = 'audio-proxy cluster hop v1';
const HOP_VERSION = 'v1';
/** Carries the registry reservation a hand-off made on the receiving node. */
export const RESERVATION_HEADER = 'x-ap-reservation';
/** A peer on the same network accepts a connection in well under this; past it, act alone. */
export const FORWARD_CONNECT_TIMEOUT_MS = 1_000;
/** Idle keep-alive sockets per peer: forwards come in bursts (coalescing), so reuse pays. */
const MAX_FREE_SOCKETS_PER_PEER = 8;

/** Hop-by-hop headers (RFC 9110 §7.6.1) and those this relay sets itself. */
const NOT_RELAYED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  HOP_HEADER,
  RESERVATION_HEADER,
]);

export type ForwardOutcome =
  | { readonly type: 'relayed'; readonly status: number; readonly complete: boolean }
  | { readonly type: 'unreachable'; readonly detail: string }
  | { readonly type: 'client_gone' };

export interface ForwardTarget {
  /** The peer's origin, e.g. `http://10.0.0.7:4000`. */
  readonly url: string;
  /** This node's id, sent in the hop header. */
  readonly fromNodeId: string;
  /** The cluster's hop key (`hopKey(AP_KEY, AP_SALT)`): authenticates the hop header. */
  readonly hopKey: Uint8Array;
  /** A reservation id made for the peer (hand-off). */
  readonly reservationId?: string;
  readonly connectTimeoutMs?: number;
}

/** A keep-alive agent for peer connections; one per node, destroyed at close. */
export function peerAgent(): Agent {
  return new Agent({ keepAlive: true, maxFreeSockets: MAX_FREE_SOCKETS_PER_PEER });
}

/** The hop key every node of a cluster derives from the signing material they share. */
export function hopKey(key: Uint8Array, salt: Uint8Array): Buffer {
  return Buffer.from(hkdfSync('sha256', key, salt, HOP_KEY_INFO, 32));
}

function hopMac(
  key: Uint8Array,
  from: string,
  atMs: string,
  method: string,
  path: string,
  toOrigin: string,
  reservationId: string,
): Buffer {
  // Newline-separated: no field may contain one (ids are checked, paths are request targets).
  const message = [HOP_VERSION, from, atMs, method, path, toOrigin, reservationId].join('\n');
  return createHmac('sha256', key).update(message).digest();
}

/** The hop header a node sends with a forward of `method path` to the peer at `toUrl`. */
export function hopHeader(
  key: Uint8Array,
  h: {
    from: string;
    method: string;
    path: string;
    toUrl: string;
    reservationId?: string;
    nowMs?: number;
  },
): string {
  const at = String(Math.trunc(h.nowMs ?? Date.now()));
  const to = new URL(h.toUrl).origin;
  const mac = hopMac(key, h.from, at, h.method, h.path, to, h.reservationId ?? '');
  return `${HOP_VERSION} ${h.from} ${at} ${mac.toString('base64url')}`;
}

export interface VerifiedHop {
  /** The forwarding node. */
  readonly from: string;
  /** The reservation the forwarder made here (hand-off), authenticated with the hop. */
  readonly reservationId: string | undefined;
}

/**
 * The request's hop, if a node of this cluster sent it to this node (`selfUrl`) for this very
 * method and path within `HOP_VALIDITY_MS`; undefined for a client's header, or none. `key` may
 * be several hop keys (key rotation): each is compared, without an early exit.
 */
export function verifiedHop(
  req: IncomingMessage,
  key: Uint8Array | readonly Uint8Array[],
  selfUrl: string,
  nowMs: number = Date.now(),
): VerifiedHop | undefined {
  const value = req.headers[HOP_HEADER];
  if (typeof value !== 'string' || value.length > MAX_HOP_HEADER_CHARS) return undefined;
  const parts = value.split(' ');
  if (parts.length !== 4 || parts[0] !== HOP_VERSION) return undefined;
  const [, from, at, mac] = parts as [string, string, string, string];
  if (from === '' || !/^\d{1,16}$/.test(at)) return undefined;
  if (Math.abs(nowMs - Number(at)) > HOP_VALIDITY_MS) return undefined;
  const r = req.headers[RESERVATION_HEADER];
  const reservationId = typeof r === 'string' && r !== '' ? r : undefined;
  const given = Buffer.from(mac, 'base64url');
  const to = new URL(selfUrl).origin;
  let matched = 0;
  for (const k of key instanceof Uint8Array ? [key] : key) {
    const expected = hopMac(k, from, at, req.method ?? '', req.url ?? '', to, reservationId ?? '');
    matched |= Number(given.length === expected.length && timingSafeEqual(given, expected));
  }
  return matched === 1 ? { from, reservationId } : undefined;
}

export function forward(
  req: IncomingMessage,
  res: ServerResponse,
  target: ForwardTarget,
  agent?: Agent,
): Promise<ForwardOutcome> {
  const base = new URL(target.url);
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !NOT_RELAYED.has(name)) headers[name] = value;
  }
  const method = req.method === 'HEAD' ? 'HEAD' : 'GET';
  const path = req.url ?? '/';
  headers[HOP_HEADER] = hopHeader(target.hopKey, {
    from: target.fromNodeId,
    method,
    path,
    toUrl: target.url,
    ...(target.reservationId ? { reservationId: target.reservationId } : {}),
  });
  if (target.reservationId) headers[RESERVATION_HEADER] = target.reservationId;
  const send = base.protocol === 'https:' ? requestTls : request;

  return new Promise<ForwardOutcome>((resolve) => {
    let settled = false;
    let answered = false;
    const done = (outcome: ForwardOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      res.off('close', onClientClose);
      resolve(outcome);
    };
    const upstream = send({
      protocol: base.protocol,
      hostname: base.hostname.replace(/^\[|\]$/g, ''),
      port: base.port,
      method,
      path,
      headers,
      ...(agent && base.protocol === 'http:' ? { agent } : {}),
    });
    const connectTimer = setTimeout(() => {
      upstream.destroy(new Error(`connect to ${target.url} timed out`));
    }, target.connectTimeoutMs ?? FORWARD_CONNECT_TIMEOUT_MS);
    upstream.on('socket', (socket) => {
      // A reused keep-alive socket is already connected.
      if (!socket.connecting) clearTimeout(connectTimer);
      else socket.once('connect', () => clearTimeout(connectTimer));
    });
    const onClientClose = () => {
      if (res.writableFinished) return;
      upstream.destroy();
      if (!answered) done({ type: 'client_gone' });
      else done({ type: 'relayed', status: res.statusCode, complete: false });
    };
    res.on('close', onClientClose);
    upstream.on('error', (error: Error) => {
      if (!answered) done({ type: 'unreachable', detail: error.message });
      // after the status line, the response's own 'aborted'/'error' handles the tear
    });
    upstream.on('response', (up) => {
      answered = true;
      const out: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(up.headers)) {
        if (value !== undefined && !NOT_RELAYED.has(name)) out[name] = value;
      }
      res.writeHead(up.statusCode ?? 502, out);
      let complete = false;
      up.on('data', (chunk: Buffer) => {
        if (!res.write(chunk)) {
          up.pause();
          res.once('drain', () => up.resume());
        }
      });
      up.on('end', () => {
        complete = up.complete;
        if (!complete) {
          res.destroy();
          done({ type: 'relayed', status: up.statusCode ?? 502, complete: false });
          return;
        }
        res.end(() => done({ type: 'relayed', status: up.statusCode ?? 502, complete: true }));
      });
      const tear = () => {
        if (complete) return;
        res.destroy(); // no terminating chunk: the client sees the tear
        done({ type: 'relayed', status: up.statusCode ?? 502, complete: false });
      };
      up.on('aborted', tear);
      up.on('error', tear);
      up.on('close', () => {
        if (!up.complete) tear();
      });
    });
    upstream.end();
  });
}
