/**
 * The accept gate in front of a real HTTP server on loopback: a request is not parsed until the
 * turn budget lets its connection through, then it is answered whole; keep-alive requests after
 * the first go straight to the parser; a silent connection is closed; close() destroys waiters.
 */
import { createServer, request, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { gateConnections } from '../../src/http/acceptGate.js';
import { TurnBudget } from '../../src/http/turns.js';

const turn = () => new Promise<void>((r) => setImmediate(r));

function setup(opts: { firstBytesTimeoutMs?: number } = {}) {
  // A clock that can be made to run 10 ms per read. Stuck, a stage queued behind the budget is
  // never released (every drain finds the budget spent), and with one stage queued every later
  // one queues behind it (FIFO): hand-overs wait. Unstuck, the queue drains in order.
  let stuck = false;
  let t = 0;
  const turns = new TurnBudget(1, () => (stuck ? (t += 10) : t));
  let requests = 0;
  const http = createServer((req, res) => {
    requests++;
    res.end(`hello ${req.url}`);
  });
  const gate = gateConnections(http, turns, opts);
  return {
    gate,
    http,
    turns,
    requests: () => requests,
    stick: (v: boolean) => {
      stuck = v;
      if (!v) return;
      // Spend this turn's budget and leave one stage queued, so nothing can pass.
      while (turns.pass() === undefined) {}
    },
    listen: () =>
      new Promise<number>((r) =>
        gate.listener.listen(0, '127.0.0.1', () => {
          http.emit('listening');
          r((gate.listener.address() as AddressInfo).port);
        }),
      ),
  };
}

let cleanup: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanup) c();
  cleanup = [];
});

function get(port: number, path: string, agent?: import('node:http').Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('gateConnections', () => {
  it('parses a request only once the turn budget hands its connection over', async () => {
    const s = setup();
    const port = await s.listen();
    cleanup.push(() => {
      s.gate.listener.close();
      s.gate.close();
      (s.http as Server).closeAllConnections();
    });
    s.stick(true);
    const answer = get(port, '/one');
    for (let i = 0; i < 20 && s.gate.waiting === 0; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(s.gate.waiting).toBe(1);
    for (let i = 0; i < 10; i++) await turn();
    expect(s.requests()).toBe(0); // bytes arrived, but the parser has not seen them
    s.stick(false);
    expect(await answer).toBe('hello /one');
    expect(s.requests()).toBe(1);
    expect(s.gate.waiting).toBe(0);
  });

  it('hands a kept-alive connection over once; its next requests need no budget', async () => {
    const s = setup();
    const port = await s.listen();
    const { Agent } = await import('node:http');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanup.push(() => {
      agent.destroy();
      s.gate.listener.close();
      s.gate.close();
    });
    expect(await get(port, '/a', agent)).toBe('hello /a');
    s.stick(true); // from here on no hand-over could happen
    expect(await get(port, '/b', agent)).toBe('hello /b');
    expect(await get(port, '/c', agent)).toBe('hello /c');
    expect(s.requests()).toBe(3);
  });

  it('closes a connection that never sends a byte', async () => {
    const s = setup({ firstBytesTimeoutMs: 100 });
    const port = await s.listen();
    cleanup.push(() => s.gate.listener.close());
    const socket = connect(port, '127.0.0.1');
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.on('error', () => {});
    await closed;
    for (let i = 0; i < 50 && s.gate.waiting > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(s.gate.waiting).toBe(0);
    expect(s.requests()).toBe(0);
  });

  it('close() destroys the connections still waiting and hands none over', async () => {
    const s = setup();
    const port = await s.listen();
    s.stick(true);
    const sockets = [0, 1, 2].map(() => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
      );
      socket.on('error', () => {});
      return new Promise<void>((r) => socket.on('close', () => r()));
    });
    for (let i = 0; i < 50 && s.gate.waiting < 3; i++) await new Promise((r) => setTimeout(r, 10));
    expect(s.gate.waiting).toBe(3);
    s.gate.listener.close();
    s.gate.close();
    s.stick(false);
    await Promise.all(sockets);
    for (let i = 0; i < 5; i++) await turn();
    expect(s.requests()).toBe(0);
  });

  it('parses the request inside the hand-over, where the turn budget that released it can count it', async () => {
    // A budget that holds every connection until the test releases it.
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    class Held extends TurnBudget {
      override pass(): Promise<void> {
        return held;
      }
    }
    let parsed = false;
    const http = createServer((_req, res) => {
      parsed = true;
      res.end('ok');
    });
    const gate = gateConnections(http, new Held());
    cleanup.push(() => {
      gate.listener.close();
      gate.close();
      http.closeAllConnections();
    });
    const port = await new Promise<number>((r) =>
      gate.listener.listen(0, '127.0.0.1', () => r((gate.listener.address() as AddressInfo).port)),
    );
    const answer = get(port, '/x');
    for (let i = 0; i < 50 && gate.waiting === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(gate.waiting).toBe(1);
    // The hand-over runs in the microtask `release` queues; this check runs right after it, before
    // any tick: the request must already have reached the handler.
    const seen = new Promise<boolean>((r) => {
      release();
      queueMicrotask(() => r(parsed));
    });
    expect(await seen).toBe(true);
    expect(await answer).toBe('ok');
  });
});
