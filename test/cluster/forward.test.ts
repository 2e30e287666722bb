/**
 * The relay between nodes, over real loopback sockets: the peer sees the same path with the hop
 * header (and the reservation id), its status, headers and bytes come back unchanged; a peer that
 * cannot be reached leaves the client's response untouched (`unreachable`) so the caller can
 * render alone; a peer torn mid-body tears the client's stream; a client that leaves aborts the
 * request to the peer.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ForwardOutcome,
  forward,
  forwardedBy,
  HOP_HEADER,
  peerAgent,
  RESERVATION_HEADER,
} from '../../src/cluster/forward.js';
import { get } from '../integration/harness.js';

const servers: Server[] = [];

async function listen(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A front node that relays every request to `peer` and records the outcome. */
async function front(peer: string, reservationId?: string) {
  const outcomes: ForwardOutcome[] = [];
  const agent = peerAgent();
  const url = await listen((req, res) => {
    void forward(req, res, { url: peer, fromNodeId: 'node-front', reservationId }, agent).then(
      (o) => {
        outcomes.push(o);
        if (o.type === 'unreachable') {
          res.writeHead(299, { 'x-fallback': 'alone' });
          res.end('rendered here');
        }
      },
    );
  });
  return { url, outcomes, agent };
}

afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

describe('forward', () => {
  it('relays path, headers and body both ways, with the hop and reservation headers', async () => {
    const seen: IncomingMessage[] = [];
    const peer = await listen((req, res) => {
      seen.push(req);
      res.writeHead(200, { 'x-audio-proxy': 'COALESCED', 'content-type': 'audio/mpeg' });
      res.write(Buffer.from('abc'));
      setImmediate(() => res.end(Buffer.from('def')));
    });
    const f = await front(peer, 'res-1');
    const r = await get(f.url, '/sig/f:mp3/plain/local://a.wav', {
      headers: { range: 'bytes=0-' },
    });
    expect(r.status).toBe(200);
    expect(r.complete).toBe(true);
    expect(r.body.toString()).toBe('abcdef');
    expect(r.headers['x-audio-proxy']).toBe('COALESCED');
    expect(r.headers['content-type']).toBe('audio/mpeg');
    expect(seen[0]!.url).toBe('/sig/f:mp3/plain/local://a.wav');
    expect(seen[0]!.headers[HOP_HEADER]).toBe('node-front');
    expect(seen[0]!.headers[RESERVATION_HEADER]).toBe('res-1');
    expect(seen[0]!.headers.range).toBe('bytes=0-');
    expect(forwardedBy(seen[0]!)).toBe('node-front');
    expect(f.outcomes).toEqual([{ type: 'relayed', status: 200, complete: true }]);
    f.agent.destroy();
  });

  it('a client cannot smuggle its own reservation header through a forward', async () => {
    const seen: IncomingMessage[] = [];
    const peer = await listen((req, res) => {
      seen.push(req);
      res.end('ok');
    });
    const f = await front(peer);
    await get(f.url, '/x', { headers: { [RESERVATION_HEADER]: 'stolen', [HOP_HEADER]: 'fake' } });
    expect(seen[0]!.headers[RESERVATION_HEADER]).toBeUndefined();
    expect(seen[0]!.headers[HOP_HEADER]).toBe('node-front');
    f.agent.destroy();
  });

  it('an unreachable peer leaves the response untouched: the caller answers alone', async () => {
    const closed = await listen(() => {});
    const dead = closed;
    const s = servers.pop()!;
    await new Promise((r) => s.close(r)); // nothing listens there any more
    const f = await front(dead);
    const r = await get(f.url, '/x');
    expect(r.status).toBe(299);
    expect(r.body.toString()).toBe('rendered here');
    expect(f.outcomes[0]!.type).toBe('unreachable');
    f.agent.destroy();
  });

  it('a peer that dies before its status line is unreachable too', async () => {
    const peer = await listen((req) => req.socket.destroy());
    const f = await front(peer);
    const r = await get(f.url, '/x');
    expect(r.status).toBe(299);
    expect(f.outcomes[0]!.type).toBe('unreachable');
    f.agent.destroy();
  });

  it('a peer torn mid-body tears the client stream (no terminating chunk)', async () => {
    const peer = await listen((_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      res.write(Buffer.alloc(1000, 1));
      setTimeout(() => res.socket?.destroy(), 30);
    });
    const f = await front(peer);
    const r = await get(f.url, '/x');
    expect(r.status).toBe(200);
    expect(r.complete).toBe(false);
    await expect
      .poll(() => f.outcomes[0])
      .toEqual({
        type: 'relayed',
        status: 200,
        complete: false,
      });
    f.agent.destroy();
  });

  it('the client leaving aborts the request to the peer', async () => {
    let peerSawClose!: () => void;
    const closedAtPeer = new Promise<void>((r) => {
      peerSawClose = r;
    });
    const peer = await listen((req, res) => {
      res.writeHead(200);
      res.write('x');
      req.socket.once('close', () => peerSawClose());
    });
    const f = await front(peer);
    const ac = new AbortController();
    await get(f.url, '/x', { signal: ac.signal, onFirstByte: () => ac.abort() }).catch(() => {});
    await closedAtPeer;
    await expect
      .poll(() => f.outcomes[0])
      .toEqual({
        type: 'relayed',
        status: 200,
        complete: false,
      });
    f.agent.destroy();
  });
});
