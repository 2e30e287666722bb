/**
 * The relay between nodes, over real loopback sockets: the peer sees the same path with the hop
 * header (and the reservation id), its status, headers and bytes come back unchanged; a peer that
 * cannot be reached leaves the client's response untouched (`unreachable`) so the caller can
 * render alone; a peer torn mid-body tears the client's stream; a client that leaves aborts the
 * request to the peer. The hop header is believed only when a node holding the cluster's key sent
 * it, recently, for this method, path, receiver and reservation.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ForwardOutcome,
  forward,
  HOP_HEADER,
  HOP_VALIDITY_MS,
  hopHeader,
  hopKey,
  peerAgent,
  RESERVATION_HEADER,
  verifiedHop,
} from '../../src/cluster/forward.js';

const KEY = hopKey(Buffer.alloc(32, 1), Buffer.from('salt'));

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
    const target = { url: peer, fromNodeId: 'node-front', hopKey: KEY, reservationId };
    void forward(req, res, target, agent).then((o) => {
      outcomes.push(o);
      if (o.type === 'unreachable') {
        res.writeHead(299, { 'x-fallback': 'alone' });
        res.end('rendered here');
      }
    });
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
    expect(seen[0]!.headers[HOP_HEADER]).toMatch(/^v1 node-front \d+ [\w-]{43}$/);
    expect(seen[0]!.headers[RESERVATION_HEADER]).toBe('res-1');
    expect(seen[0]!.headers.range).toBe('bytes=0-');
    expect(verifiedHop(seen[0]!, KEY, peer)).toEqual({
      from: 'node-front',
      reservationId: 'res-1',
    });
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
    expect(verifiedHop(seen[0]!, KEY, peer)).toEqual({
      from: 'node-front',
      reservationId: undefined,
    });
    f.agent.destroy();
  });

  it('a hop header is believed only from a key holder, for this path, receiver, reservation, now', async () => {
    const seen: IncomingMessage[] = [];
    const node = await listen((req, res) => {
      seen.push(req);
      res.end();
    });
    const now = Date.now();
    const at = (method: string, path: string, headers: Record<string, string>) =>
      get(node, path, { method, headers }).then(() => seen.at(-1)!);
    const good = (over: Partial<Parameters<typeof hopHeader>[1]> = {}, key: Uint8Array = KEY) =>
      hopHeader(key, {
        from: 'node-a',
        method: 'GET',
        path: '/p',
        toUrl: node,
        nowMs: now,
        ...over,
      });
    const hop = async (value: string, extra: Record<string, string> = {}, path = '/p') =>
      verifiedHop(await at('GET', path, { [HOP_HEADER]: value, ...extra }), KEY, node, now);

    expect(await hop(good())).toEqual({ from: 'node-a', reservationId: undefined });
    expect(await hop(good({ reservationId: 'r1' }), { [RESERVATION_HEADER]: 'r1' })).toEqual({
      from: 'node-a',
      reservationId: 'r1',
    });
    // What a client can send: a bare node id (the old format), junk, or a MAC it cannot make.
    expect(await hop('node-a')).toBeUndefined();
    expect(await hop('v1 node-a 1 AAAA')).toBeUndefined();
    expect(await hop(good({}, hopKey(Buffer.alloc(32, 2), Buffer.from('salt'))))).toBeUndefined();
    // A real hop reused elsewhere: another path, method, receiver, reservation, or too late.
    expect(await hop(good(), {}, '/q')).toBeUndefined();
    expect(
      verifiedHop(await at('HEAD', '/p', { [HOP_HEADER]: good() }), KEY, node, now),
    ).toBeUndefined();
    expect(await hop(good({ toUrl: 'http://127.0.0.1:1' }))).toBeUndefined();
    expect(
      await hop(good({ reservationId: 'r1' }), { [RESERVATION_HEADER]: 'r2' }),
    ).toBeUndefined();
    expect(await hop(good(), { [RESERVATION_HEADER]: 'stolen' })).toBeUndefined();
    expect(await hop(good({ nowMs: now - HOP_VALIDITY_MS - 1 }))).toBeUndefined();
    expect(await hop(good({ nowMs: now + HOP_VALIDITY_MS + 1 }))).toBeUndefined();
    expect(await hop(good({ nowMs: now - HOP_VALIDITY_MS + 1_000 }))).toBeDefined();
  });

  it('during a key rotation a hop made with any configured pair is believed, and no other', async () => {
    const seen: IncomingMessage[] = [];
    const node = await listen((req, res) => {
      seen.push(req);
      res.end();
    });
    const now = Date.now();
    const older = hopKey(Buffer.alloc(32, 3), Buffer.from('old salt'));
    const stranger = hopKey(Buffer.alloc(32, 4), Buffer.from('salt'));
    const sent = async (key: Uint8Array) => {
      const value = hopHeader(key, {
        from: 'node-a',
        method: 'GET',
        path: '/p',
        toUrl: node,
        nowMs: now,
      });
      await get(node, '/p', { headers: { [HOP_HEADER]: value } });
      return seen.at(-1)!;
    };
    const keys = [KEY, older];
    expect(verifiedHop(await sent(KEY), keys, node, now)).toEqual({
      from: 'node-a',
      reservationId: undefined,
    });
    expect(verifiedHop(await sent(older), keys, node, now)).toEqual({
      from: 'node-a',
      reservationId: undefined,
    });
    expect(verifiedHop(await sent(stranger), keys, node, now)).toBeUndefined();
    // A node that knows only the new pair no longer believes the old one.
    expect(verifiedHop(await sent(older), [KEY], node, now)).toBeUndefined();
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
