/**
 * Forwarding: relays one public request to a peer node and the peer's answer back, byte for
 * byte. Used when a peer owns the key's render claim (the peer answers from its coordinator as a
 * COALESCED stream) and when this node's queue is full (hand-off to a peer with a free slot).
 *
 * ## Invariants
 * - **One hop at most.** Every forwarded request carries `x-ap-forwarded: <nodeId>`; a node that
 *   receives it never forwards or hands it off again, so two nodes cannot bounce a request.
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
import { Agent, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { request as requestTls } from 'node:https';

/** Marks a request as forwarded once; its value is the forwarding node's id. */
export const HOP_HEADER = 'x-ap-forwarded';
/** Carries the registry reservation a hand-off made on the receiving node. */
export const RESERVATION_HEADER = 'x-ap-reservation';
/** A peer on the same network accepts a connection in well under this; past it, act alone. */
export const CONNECT_TIMEOUT_MS = 1_000;
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
  /** A reservation id made for the peer (hand-off). */
  readonly reservationId?: string;
  readonly connectTimeoutMs?: number;
}

/** A keep-alive agent for peer connections; one per node, destroyed at close. */
export function peerAgent(): Agent {
  return new Agent({ keepAlive: true, maxFreeSockets: MAX_FREE_SOCKETS_PER_PEER });
}

/** Whether the request was already forwarded once (and by whom). */
export function forwardedBy(req: IncomingMessage): string | undefined {
  const v = req.headers[HOP_HEADER];
  return typeof v === 'string' && v !== '' ? v : undefined;
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
  headers[HOP_HEADER] = target.fromNodeId;
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
      method: req.method === 'HEAD' ? 'HEAD' : 'GET',
      path: req.url ?? '/',
      headers,
      ...(agent && base.protocol === 'http:' ? { agent } : {}),
    });
    const connectTimer = setTimeout(() => {
      upstream.destroy(new Error(`connect to ${target.url} timed out`));
    }, target.connectTimeoutMs ?? CONNECT_TIMEOUT_MS);
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
