/**
 * The metrics listener's request handler: each extra route in order (the `/debug/actors` live
 * view), then `GET`/`HEAD /metrics` (the Prometheus exposition, never cached), then the
 * not-found answer the caller supplies (the proxy's error table's route 404).
 *
 * The metrics port is an operator's port, separate from the public listener: nothing here reads
 * signatures, sources or the turn budget. Routes are tried on the path alone (the query string
 * is ignored).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Metrics } from '../telemetry/metrics.js';

/** A route on the metrics listener: answers and returns true, or returns false to pass. */
export interface MetricsRoute {
  handle(req: IncomingMessage, res: ServerResponse, path: string): boolean;
}

export interface MetricsRouterOptions {
  readonly metrics: Pick<Metrics, 'expose'>;
  /** Tried before `/metrics`, in order. */
  readonly routes?: readonly MetricsRoute[];
  /** What any other path is answered with. */
  readonly notFound: () => {
    readonly status: number;
    readonly headers: Readonly<Record<string, string>>;
    readonly body: string;
  };
}

export function metricsRouter(
  options: MetricsRouterOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const routes = options.routes ?? [];
  return async (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    for (const route of routes) if (route.handle(req, res, path)) return;
    if ((req.method === 'GET' || req.method === 'HEAD') && path === '/metrics') {
      const { contentType, body } = await options.metrics.expose();
      res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    const r = options.notFound();
    res.writeHead(r.status, r.headers);
    res.end(r.body);
  };
}
