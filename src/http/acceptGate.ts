/**
 * Hands accepted connections to the HTTP server a turn budget's worth at a time.
 *
 * libuv drains up to 48 × 1,024 ready sockets in one poll phase, and Node's HTTP server parses
 * every request that arrived on them right there: during a burst of thousands of new connections
 * that is ~2,000 requests (170 ms) in one loop turn, with `/health` waiting behind it. The
 * listener here is a plain `net.Server` with `pauseOnConnect`. The gate reads a socket's first
 * bytes itself, puts them back (`unshift`) and pauses it; only then does it pass the socket to the
 * HTTP server (`emit('connection')`, then `resume()` and a synchronous `read()` that delivers
 * the first bytes to the parser), through the same `TurnBudget` as the request stages. Requests
 * are parsed inside the hand-over (so the budget's clock counts the parse), a budget's worth per
 * turn, not when their bytes happen to arrive. Kept-alive connections are handed over once;
 * their later requests go straight to the parser.
 *
 * ## Invariants
 * - **Every accepted socket is handed over or destroyed**, in the order its first bytes came;
 *   the parser sees those bytes first and whole.
 * - **A connection that sends nothing is closed** after `FIRST_BYTES_TIMEOUT_MS` (the HTTP
 *   server's own header timeout only starts at the hand-over).
 * - **After `close()` nothing is handed over**: sockets still waiting are destroyed, and the
 *   listener accepts no more.
 * - **A socket that fails while it waits is dropped quietly** (its peer reset it): the error has
 *   a listener until the HTTP server's own takes over.
 *
 * ## Races
 * - *The peer resets a socket queued behind the budget*: it is destroyed by then and skipped.
 * - *`close()` while hand-overs are deferred*: they run later, see the gate closed, destroy.
 */

import type { Server as HttpServer } from 'node:http';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import type { TurnBudget } from './turns.js';

/** How long an accepted connection may stay silent before the gate closes it, in ms. */
export const FIRST_BYTES_TIMEOUT_MS = 60_000; // Node's own headersTimeout default

export interface AcceptGate {
  /** The listening socket's server: `listen`, `address`, `close` it like any `net.Server`. */
  readonly listener: NetServer;
  /** Sockets accepted and not yet handed over. */
  readonly waiting: number;
  /** Stops handing over; destroys the sockets still waiting. Call with `listener.close()`. */
  close(): void;
}

export function gateConnections(
  http: HttpServer,
  turns: TurnBudget,
  opts: { readonly firstBytesTimeoutMs?: number } = {},
): AcceptGate {
  const silentMs = opts.firstBytesTimeoutMs ?? FIRST_BYTES_TIMEOUT_MS;
  const waiting = new Set<Socket>();
  let closed = false;
  const quiet = () => {};
  /** Runs with the socket as `this`: a connection that sent nothing in time. */
  function silent(this: Socket) {
    this.destroy();
  }
  const handOver = (socket: Socket) => {
    waiting.delete(socket);
    socket.off('error', quiet);
    socket.off('timeout', silent);
    socket.setTimeout(0);
    if (socket.destroyed) return;
    if (closed) {
      socket.destroy();
      return;
    }
    http.emit('connection', socket);
    socket.resume();
    // Deliver the first bytes now, not on the next tick (where `resume()` would): the request is
    // parsed, and its handler runs to its first stage, inside this hand-over, so the turn budget
    // that released it sees that cost; a tick would run it after the budget's clock was read.
    socket.read();
  };
  const firstBytes = (socket: Socket, chunk: Buffer) => {
    socket.pause();
    socket.unshift(chunk);
    const wait = turns.pass();
    if (wait === undefined) handOver(socket);
    else void wait.then(() => handOver(socket));
  };
  const listener = createServer({ pauseOnConnect: true }, (socket) => {
    if (closed) {
      socket.destroy();
      return;
    }
    waiting.add(socket);
    socket.on('error', quiet);
    socket.once('close', () => waiting.delete(socket));
    socket.setTimeout(silentMs);
    socket.on('timeout', silent);
    socket.once('data', (chunk: Buffer) => firstBytes(socket, chunk));
    socket.resume();
  });
  return {
    listener,
    get waiting() {
      return waiting.size;
    },
    close() {
      closed = true;
      for (const socket of waiting) socket.destroy();
      waiting.clear();
    },
  };
}
