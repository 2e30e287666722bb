/**
 * The proxy's two listening sockets: the public one, whose connections pass through the accept
 * gate (`http/acceptGate.ts`, one turn budget shared with the request stages) before the HTTP
 * server parses them, and the metrics one (`/metrics`, `/debug/actors`), a plain HTTP server.
 *
 * ## Invariants
 * - **A failed `listen()` leaves nothing bound**: it rejects with a `ListenError`
 *   (`ERR_AP_LISTEN`, naming the listener, address and port, the system error as `cause`) after
 *   closing whatever it had bound; a later `listen()` may try again.
 * - **Shutting down is two steps**: `stopAccepting()` closes both sockets and the idle keep-alive
 *   connections while responses in flight go on; `closeAll()` ends what is still open once the
 *   proxy has drained and stopped.
 * - **The public listener queues `LISTEN_BACKLOG` pending connections**, not Node's 511.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { type AcceptGate, gateConnections } from '../http/acceptGate.js';
import type { TurnBudget } from '../http/turns.js';

/**
 * Pending connections the kernel may queue for the public listener. Node's default (511) is
 * overrun by a burst of a few thousand clients: the overflow is reset instead of answered, where
 * the contract promises a 429. The kernel caps it at `net.core.somaxconn` (4096 on Debian 12).
 */
export const LISTEN_BACKLOG = 4_096;

/** `listen()` could not bind: `code` is `ERR_AP_LISTEN`, `cause` the system error (EADDRINUSE…). */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  readonly code = 'ERR_AP_LISTEN';
  readonly address: string;
  readonly port: number;
  /** Which listener failed. */
  readonly listener: 'public' | 'metrics';
  constructor(listener: 'public' | 'metrics', address: string, port: number, cause: unknown) {
    const why = (cause as NodeJS.ErrnoException | undefined)?.code ?? String(cause);
    const where = address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
    super(`cannot listen on ${where} (${listener} listener): ${why}`, { cause });
    this.listener = listener;
    this.address = address;
    this.port = port;
  }
}

type RequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Where a listener binds; an undefined host is every interface. */
export interface BindAddress {
  readonly host: string | undefined;
  readonly port: number;
}

export class Listeners {
  readonly #handler: RequestHandler;
  readonly #metricsHandler: RequestHandler;
  readonly #turns: TurnBudget;
  #public: Server | null = null;
  #gate: AcceptGate | null = null;
  #metrics: Server | null = null;
  #stopped: readonly Server[] = [];

  constructor(options: {
    readonly handler: RequestHandler;
    readonly metricsHandler: RequestHandler;
    /** Shared with the request stages, so connections and stages draw on one budget. */
    readonly turns: TurnBudget;
  }) {
    this.#handler = options.handler;
    this.#metricsHandler = options.metricsHandler;
    this.#turns = options.turns;
  }

  /** Binds both listeners; resolves with their URLs, or rejects with a `ListenError`. */
  async listen(
    publicAt: BindAddress,
    metricsAt: BindAddress,
  ): Promise<{ url: string; metricsUrl: string }> {
    const publicServer = createServer((req, res) => void this.#handler(req, res));
    const metricsServer = createServer((req, res) => void this.#metricsHandler(req, res));
    // The public port is accepted by the gate, which feeds the HTTP server turn by turn.
    const gate = gateConnections(publicServer, this.#turns);
    [this.#public, this.#metrics, this.#gate] = [publicServer, metricsServer, gate];
    try {
      await bind(gate.listener, 'public', { ...publicAt, backlog: LISTEN_BACKLOG });
      await bind(metricsServer, 'metrics', metricsAt);
    } catch (error) {
      // Nothing stays bound and nothing is left to close: a later listen() may try again.
      gate.listener.close();
      gate.close();
      metricsServer.close();
      [this.#public, this.#metrics, this.#gate] = [null, null, null];
      throw error;
    }
    // The HTTP server never listens itself; its 'listening' starts the connection tracking
    // that header/request timeouts and closeIdleConnections/closeAllConnections rely on.
    publicServer.emit('listening');
    const a = gate.listener.address() as AddressInfo;
    const m = metricsServer.address() as AddressInfo;
    const host = (addr: AddressInfo) =>
      addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    return { url: `http://${host(a)}:${a.port}`, metricsUrl: `http://${host(m)}:${m.port}` };
  }

  /** Accepts nothing more and closes idle connections; responses in flight go on. */
  stopAccepting(): void {
    const servers = [this.#public, this.#metrics].filter((s): s is Server => s !== null);
    this.#gate?.listener.close();
    this.#gate?.close();
    for (const s of servers) {
      s.close();
      s.closeIdleConnections();
    }
    this.#stopped = servers;
  }

  /** Ends every connection `stopAccepting` left open. */
  closeAll(): void {
    for (const s of this.#stopped) s.closeAllConnections();
  }
}

/** `server.listen(at)`, rejecting with a `ListenError` instead of emitting an unhandled 'error'. */
function bind(
  server: NetServer,
  listener: 'public' | 'metrics',
  at: BindAddress & { readonly backlog?: number },
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (error: Error) =>
      reject(new ListenError(listener, at.host ?? '::', at.port, error));
    server.once('error', onError);
    server.listen(at, () => {
      server.off('error', onError);
      resolve();
    });
  });
}
