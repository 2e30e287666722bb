// The metrics listener's router: extra routes first (the live view), then GET/HEAD /metrics with
// the exposition uncached (HEAD without a body), the query string ignored; anything else is the
// not-found answer it was given.
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { type MetricsRoute, metricsRouter } from '../../src/services/metricsRouter.js';

function exchange(method: string, url: string) {
  const req = new IncomingMessage(new Socket());
  req.method = method;
  req.url = url;
  const res = new ServerResponse(req);
  const written: { status?: number; headers?: Record<string, unknown>; body?: unknown } = {};
  res.writeHead = ((status: number, headers: Record<string, unknown>) => {
    written.status = status;
    written.headers = headers;
    return res;
  }) as typeof res.writeHead;
  res.end = ((body?: unknown) => {
    written.body = body;
    return res;
  }) as typeof res.end;
  return { req, res, written };
}

const metrics = {
  expose: async () => ({ contentType: 'text/plain; version=0.0.4', body: 'up 1\n' }),
};
const notFound = () => ({
  status: 404,
  headers: { 'content-type': 'application/json' },
  body: '{"error":"not_found"}',
});

describe('metricsRouter', () => {
  it('serves /metrics uncached, HEAD without a body, ignoring the query', async () => {
    const route = metricsRouter({ metrics, notFound });
    const get = exchange('GET', '/metrics?x=1');
    await route(get.req, get.res);
    expect(get.written).toEqual({
      status: 200,
      headers: { 'content-type': 'text/plain; version=0.0.4', 'cache-control': 'no-store' },
      body: 'up 1\n',
    });
    const head = exchange('HEAD', '/metrics');
    await route(head.req, head.res);
    expect(head.written.status).toBe(200);
    expect(head.written.body).toBeUndefined();
  });

  it('tries the extra routes first, on the path alone', async () => {
    const paths: string[] = [];
    const live: MetricsRoute = {
      handle: (_req, res, path) => {
        paths.push(path);
        if (path !== '/debug/actors') return false;
        res.end('live');
        return true;
      },
    };
    const route = metricsRouter({ metrics, routes: [live], notFound });
    const debug = exchange('GET', '/debug/actors?watch=1');
    await route(debug.req, debug.res);
    expect(debug.written.body).toBe('live');
    const scrape = exchange('GET', '/metrics');
    await route(scrape.req, scrape.res);
    expect(scrape.written.body).toBe('up 1\n');
    expect(paths).toEqual(['/debug/actors', '/metrics']);
  });

  it('answers anything else with the given not-found', async () => {
    const route = metricsRouter({ metrics, notFound });
    for (const [method, url] of [
      ['GET', '/'],
      ['POST', '/metrics'],
      ['GET', '/metrics/x'],
    ] as const) {
      const x = exchange(method, url);
      await route(x.req, x.res);
      expect(x.written).toEqual({
        status: 404,
        headers: { 'content-type': 'application/json' },
        body: '{"error":"not_found"}',
      });
    }
  });
});
