// The two listeners on their own: both bind and route to their handlers (the public one through
// the accept gate), a port already taken rejects with a ListenError naming the listener and
// leaves nothing bound (a later listen succeeds), and shutting down is two steps: stopAccepting
// refuses new connections while a response in flight goes on, closeAll ends it.
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { TurnBudget } from '../../src/http/turns.js';
import { LISTEN_BACKLOG, ListenError, Listeners } from '../../src/proxy/listeners.js';

const open: Listeners[] = [];
afterEach(() => {
  for (const l of open.splice(0)) {
    l.stopAccepting();
    l.closeAll();
  }
});

function listeners(
  handler = async (_req: unknown, res: import('node:http').ServerResponse) => {
    res.end('public');
  },
) {
  const l = new Listeners({
    handler,
    metricsHandler: async (_req, res) => {
      res.end('metrics');
    },
    turns: new TurnBudget(),
  });
  open.push(l);
  return l;
}

const local = { host: '127.0.0.1', port: 0 };

describe('Listeners', () => {
  it('binds both and routes each to its handler', async () => {
    const { url, metricsUrl } = await listeners().listen(local, local);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await (await fetch(`${url}/x`)).text()).toBe('public');
    expect(await (await fetch(`${metricsUrl}/metrics`)).text()).toBe('metrics');
    expect(LISTEN_BACKLOG).toBe(4_096);
  });

  it('rejects a taken port with a ListenError and leaves nothing bound', async () => {
    const squatter = createServer();
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    const taken = (squatter.address() as AddressInfo).port;
    try {
      const l = listeners();
      const attempt = l.listen(local, { host: '127.0.0.1', port: taken });
      await expect(attempt).rejects.toBeInstanceOf(ListenError);
      await expect(attempt).rejects.toMatchObject({
        code: 'ERR_AP_LISTEN',
        listener: 'metrics',
        address: '127.0.0.1',
        port: taken,
        cause: expect.objectContaining({ code: 'EADDRINUSE' }),
        message: `cannot listen on 127.0.0.1:${taken} (metrics listener): EADDRINUSE`,
      });
      // the public port it had bound is free again, and the same Listeners may try again
      const { url } = await l.listen(local, local);
      expect(await (await fetch(url)).text()).toBe('public');
    } finally {
      squatter.close();
    }
  });

  it('stopAccepting refuses new connections while a response goes on; closeAll ends it', async () => {
    let began!: () => void;
    const beganP = new Promise<void>((r) => {
      began = r;
    });
    const l = listeners(async (_req, res) => {
      res.writeHead(200);
      res.write('first');
      began(); // and never ends by itself
    });
    const { url } = await l.listen(local, local);
    const ended = new Promise<string>((resolve) => {
      request(url, (res) => {
        res.on('data', () => {});
        res.on('close', () => resolve(res.complete ? 'complete' : 'cut'));
      }).end();
    });
    await beganP;
    l.stopAccepting();
    await expect(fetch(url)).rejects.toThrow();
    l.closeAll();
    expect(await ended).toBe('cut');
  });
});

describe('ListenError', () => {
  it('brackets an IPv6 address and keeps the cause', () => {
    const cause = Object.assign(new Error('x'), { code: 'EACCES' });
    const error = new ListenError('public', '::1', 80, cause);
    expect(error.message).toBe('cannot listen on [::1]:80 (public listener): EACCES');
    expect(error).toMatchObject({ name: 'ListenError', listener: 'public', cause });
  });
});
