/**
 * Stages under test without the proxy: each call starts a loopback server whose one request is
 * handed to `run` as an `Exchange` (with a `StageContext` built from `env` and fake services),
 * and answers what the client received, plus what `run` returned. Nothing else is booted.
 */
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig, staticConfig } from '../../../src/config/index.js';
import type { Exchange, StageContext } from '../../../src/http/exchange.js';
import type { HandlerObservers, HandlerServices } from '../../../src/http/services.js';
import { TurnBudget } from '../../../src/http/turns.js';

export interface Received<T> {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** What the stage returned. */
  readonly result: T;
}

/** Services that answer nothing: a test overrides the members its stage uses. */
export function fakeServices(overrides: Partial<HandlerServices> = {}): HandlerServices {
  const unused = () => {
    throw new Error('not used by this stage');
  };
  return {
    config: staticConfig(loadConfig({ AP_ALLOW_INSECURE: '1' })),
    version: 'test',
    ffmpeg: () => ({ path: '/usr/bin/ffmpeg', source: 'test' }),
    nowMs: () => 1_900_000_000_000,
    ready: unused,
    probe: unused,
    subscribe: unused,
    unsubscribe: async () => {},
    retryAfterS: async () => 1,
    ...overrides,
  };
}

export function contextOf(
  env: Record<string, string> = {},
  services: Partial<HandlerServices> = {},
  observers: HandlerObservers = {},
): StageContext {
  const config = loadConfig({ AP_ALLOW_INSECURE: '1', ...env });
  return {
    config,
    services: fakeServices({ config: staticConfig(config), ...services }),
    observers,
  };
}

export interface ExchangeOptions {
  readonly method?: string;
  readonly path?: string;
  readonly headers?: Record<string, string>;
  readonly cors?: Record<string, string>;
}

/** One request through `run` on a loopback server; resolves with the answer and `run`'s result. */
export async function exchange<T>(
  run: (x: Exchange) => T | Promise<T>,
  options: ExchangeOptions = {},
): Promise<Received<T>> {
  let result!: T;
  let failed: unknown;
  const server = createServer((req, res) => {
    const x: Exchange = {
      req,
      res,
      head: req.method === 'HEAD',
      cors: options.cors ?? {},
      endpoint: 'unknown',
      turns: new TurnBudget(),
      stage: 'request',
    };
    Promise.resolve()
      .then(() => run(x))
      .then(
        (r) => {
          result = r;
          // A stage that did not answer leaves the response to the router: end it here.
          if (!res.headersSent) {
            res.writeHead(599);
            res.end();
          }
        },
        (error: unknown) => {
          failed = error;
          res.destroy();
        },
      );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  try {
    const answer = await new Promise<Omit<Received<T>, 'result'>>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: options.method ?? 'GET',
          path: options.path ?? '/',
          headers: options.headers,
          agent: false,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks).toString(),
            }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', (error) => reject(failed ?? error));
      req.end();
    });
    if (failed !== undefined) throw failed;
    return { ...answer, result };
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** A stage that did not answer: the harness's own marker status. */
export const NOT_ANSWERED = 599;
