/**
 * The delivery adapter (`http/delivery.ts`) on a loopback exchange with a fake subscribe call
 * (no proxy, no coordinator): a MISS streams its chunks after one 200 and ends; messages that
 * arrive before the subscribe answer are held and follow its backlog; an error is its status
 * before the first byte and a torn stream after it; a render cancelled while the node stops is
 * 503; silence past the consumer deadline is 429 with the semaphore's Retry-After and leaves the
 * coordinator; a client that leaves is unsubscribed; a full queue in cluster mode is handed off;
 * a subscribe call that throws rejects (the router answers 500). Each request runs one delivery
 * actor, tracked for the live view, ended with its response, with one telemetry event; an `ok`
 * one is published when the response has finished and closed, and a reader that leaves after the
 * last byte was written but before it was sent is `cancelled`.
 */
import diagnostics from 'node:diagnostics_channel';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AnyActorRef } from 'xstate';
import type { RenderRequest, SubscribeOutcome } from '../../src/core/request.js';
import { deliver } from '../../src/http/delivery.js';
import type { HandlerServices } from '../../src/http/services.js';
import type { SubscriberMessage } from '../../src/machines/renderCoordinator.js';
import { RENDER_CHANNELS } from '../../src/telemetry/channels.js';
import { contextOf, exchange } from './stages/harness.js';

const REQUEST = {
  key: 'f:mp3/local://a.wav',
  options: { format: 'mp3' },
  source: { canonical: 'local://a.wav' },
} as unknown as RenderRequest;
const HEADERS = { 'content-type': 'audio/mpeg', etag: '"k"' };
const COORDINATOR = { id: 'fake-coordinator' } as unknown as AnyActorRef;

type Send = (message: SubscriberMessage) => void;

/** A subscribe call that answers `outcome` after `before` ran with the inbox, then `after`. */
function subscribing(
  outcome: SubscribeOutcome,
  script: { before?: (send: Send) => void; after?: (send: Send) => void } = {},
) {
  const unsubscribed: string[] = [];
  const services: Partial<HandlerServices> = {
    subscribe: async (_request, _id, onMessage) => {
      script.before?.(onMessage);
      if (script.after) setTimeout(() => script.after!(onMessage), 10);
      return outcome;
    },
    unsubscribe: async (_coordinator, id) => {
      unsubscribed.push(id);
    },
  };
  return { services, unsubscribed };
}

const miss = (state: 'queued' | 'rendering' = 'queued', backlog: Buffer[] = []) =>
  ({ type: 'miss', coordinator: COORDINATOR, state, backlog }) as const;

let events: { channel: string; data: Record<string, unknown> }[] = [];
const listeners = [RENDER_CHANNELS.stop, RENDER_CHANNELS.exception].map((channel) => {
  const listener = (data: unknown) =>
    events.push({ channel, data: data as Record<string, unknown> });
  return { channel, listener };
});
beforeEach(() => {
  events = [];
  for (const { channel, listener } of listeners) diagnostics.subscribe(channel, listener);
});
afterEach(() => {
  for (const { channel, listener } of listeners) diagnostics.unsubscribe(channel, listener);
});

function tracking() {
  const actors: { actor: AnyActorRef; name: string }[] = [];
  return { actors, track: (actor: AnyActorRef, name: string) => actors.push({ actor, name }) };
}

describe('delivery adapter', () => {
  it('stamps each chunk, so a streaming chart leaves its deadline running (re-armed lazily)', async () => {
    const t = tracking();
    const { services } = subscribing(miss(), {
      after: (send) => {
        send({ type: 'rendering' });
        send({ type: 'chunk', data: Buffer.from('ab') });
        send({ type: 'chunk', data: Buffer.from('cd') });
        send({ type: 'chunk', data: Buffer.from('ef') });
        send({ type: 'done', info: { exitStatus: 0, bytes: 6 } });
      },
    });
    const before = performance.now();
    const ctx = contextOf({}, services, { track: t.track });
    const r = await exchange(async (x) => deliver(x, ctx, REQUEST, HEADERS));
    expect(r.body).toBe('abcdef');
    const { context } = t.actors[0]!.actor.getSnapshot();
    // The first chunk armed the timer against its stamp; the later ones were only heard.
    expect(context.deadlineAt).toBeGreaterThanOrEqual(before + context.deadlineMs);
    expect(context.heardAt).toBeGreaterThanOrEqual(context.deadlineAt - context.deadlineMs);
    expect(context.heardAt).toBeLessThanOrEqual(performance.now());
    expect(context.bytes).toBe(6);
  });

  it('streams a MISS after one 200 and ends: one actor, tracked, done, one stop event', async () => {
    const t = tracking();
    const { services } = subscribing(miss(), {
      after: (send) => {
        send({ type: 'rendering' });
        send({ type: 'chunk', data: Buffer.from('ab') });
        send({ type: 'chunk', data: Buffer.from('cd') });
        send({ type: 'done', info: { exitStatus: 0, bytes: 4 } });
      },
    });
    const ctx = contextOf({}, services, { track: t.track });
    const r = await exchange(async (x) => {
      await deliver(x, ctx, REQUEST, HEADERS);
      return x.cache;
    });
    expect(r.status).toBe(200);
    expect(r.headers['x-audio-proxy']).toBe('MISS');
    // The variant's identity, strong like the HIT's (the contract; docs/ranges.md).
    expect(r.headers.etag).toBe('"k"');
    expect(r.body).toBe('abcd');
    expect(r.result).toBe('MISS');
    expect(t.actors).toHaveLength(1);
    expect(t.actors[0]!.name).toMatch(/^delivery:sub-\d+$/);
    expect(t.actors[0]!.actor.getSnapshot().status).toBe('done');
    expect(events).toEqual([
      {
        channel: RENDER_CHANNELS.stop,
        data: expect.objectContaining({ outcome: 'ok', bytes: 4, cache_status: 'miss' }),
      },
    ]);
  });

  it('holds messages that arrive before the answer and replays them after its backlog', async () => {
    const { services } = subscribing(
      {
        type: 'coalesced',
        coordinator: COORDINATOR,
        state: 'rendering',
        backlog: [Buffer.from('ab')],
      },
      {
        before: (send) => {
          send({ type: 'chunk', data: Buffer.from('c') });
          send({ type: 'done', info: { exitStatus: 0, bytes: 3 } });
        },
      },
    );
    const r = await exchange((x) => deliver(x, contextOf({}, services), REQUEST, HEADERS));
    expect(r.headers['x-audio-proxy']).toBe('COALESCED');
    expect(r.body).toBe('abc');
  });

  it("answers an error's status before the first byte, 503 when the node stops", async () => {
    const failing = subscribing(miss('rendering'), {
      after: (send) => send({ type: 'error', failure: { class: 'undecodable' } }),
    });
    const r = await exchange((x) => deliver(x, contextOf({}, failing.services), REQUEST, HEADERS));
    expect(r.status).toBe(415);
    expect(events[0]).toMatchObject({
      channel: RENDER_CHANNELS.exception,
      data: { class: 'undecodable' },
    });

    const stopping = subscribing(miss('rendering'), {
      after: (send) => send({ type: 'error', failure: { class: 'cancelled' } }),
    });
    const s = await exchange((x) =>
      deliver(x, contextOf({}, { ...stopping.services, stopping: () => true }), REQUEST, HEADERS),
    );
    expect(s.status).toBe(503);
    expect(JSON.parse(s.body).error).toBe('shutting_down');
  });

  it('tears the stream down on an error after the first byte', async () => {
    const { services } = subscribing(miss('rendering'), {
      after: (send) => {
        send({ type: 'chunk', data: Buffer.from('ab') });
        send({ type: 'error', failure: { class: 'render_failed', exitStatus: 1 } });
      },
    });
    await expect(
      exchange((x) => deliver(x, contextOf({}, services), REQUEST, HEADERS)),
    ).rejects.toThrow();
  });

  it('answers 429 with the semaphore Retry-After when no slot comes before the deadline', async () => {
    const { services, unsubscribed } = subscribing(miss('queued'));
    const ctx = contextOf({ AP_RENDER_TIMEOUT: '1' }, { ...services, retryAfterS: async () => 5 });
    const started = Date.now();
    const r = await exchange((x) => deliver(x, ctx, REQUEST, HEADERS));
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_900);
    expect(r.status).toBe(429);
    expect(r.headers['retry-after']).toBe('5');
    expect(unsubscribed).toHaveLength(1);
  }, 10_000);

  it('hands a full queue off in cluster mode, and answers the cluster refusal', async () => {
    const full = subscribing({ type: 'failed', failure: { class: 'queue_full', retryAfterS: 2 } });
    const offered: number[] = [];
    const ctx = contextOf(
      {},
      {
        ...full.services,
        cluster: {
          beforeRender: () => Promise.reject(new Error('unused')),
          handOff: async (_req, _res, _key, retryAfterS) => {
            offered.push(retryAfterS);
            return { type: 'refused', retryAfterS: 9 };
          },
        },
      },
    );
    const r = await exchange((x) => deliver(x, ctx, REQUEST, HEADERS));
    expect(offered).toEqual([2]);
    expect(r.status).toBe(429);
    expect(r.headers['retry-after']).toBe('9');
  });

  it('rejects when the subscribe call throws, with the delivery ended as a fault', async () => {
    const t = tracking();
    const ctx = contextOf(
      {},
      { subscribe: () => Promise.reject(new Error('boom')) },
      { track: t.track },
    );
    await expect(exchange((x) => deliver(x, ctx, REQUEST, HEADERS))).rejects.toThrow('boom');
    expect(t.actors[0]!.actor.getSnapshot().status).toBe('done');
    expect(events[0]).toMatchObject({
      channel: RENDER_CHANNELS.exception,
      data: { class: 'render_failed', detail: 'internal error' },
    });
  });

  it('unsubscribes a client that leaves mid-stream and stops its actor', async () => {
    const t = tracking();
    let send!: Send;
    const unsubscribed: string[] = [];
    const ctx = contextOf(
      {},
      {
        subscribe: async (_request, _id, onMessage) => {
          send = onMessage;
          return miss('rendering');
        },
        unsubscribe: async (_c, id) => {
          unsubscribed.push(id);
        },
      },
      { track: t.track },
    );
    let settled = false;
    const server = createServer((req, res) => {
      const x = {
        req,
        res,
        head: false,
        cors: {},
        endpoint: 'render',
        turns: undefined,
        stage: 'request',
      };
      void deliver(x as never, ctx, REQUEST, HEADERS).then(() => (settled = true));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      await new Promise<void>((resolve) => {
        const req = request({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        });
        req.on('error', () => {});
        req.end();
        const pump = setInterval(() => send?.({ type: 'chunk', data: Buffer.from('x') }), 5);
        req.on('close', () => clearInterval(pump));
      });
      await expect.poll(() => settled).toBe(true);
      expect(unsubscribed).toHaveLength(1);
      expect(t.actors[0]!.actor.getSnapshot().status).toBe('done');
      expect(t.actors[0]!.actor.getSnapshot().output).toMatchObject({ outcome: 'cancelled' });
      expect(events.at(-1)).toMatchObject({ data: { outcome: 'cancelled' } });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
  it('publishes an ok delivery once the response has finished and closed, then settles', async () => {
    const order: string[] = [];
    const { services } = subscribing(miss('rendering'), {
      after: (send) => {
        send({ type: 'chunk', data: Buffer.from('abcd') });
        send({ type: 'done', info: { exitStatus: 0, bytes: 4 } });
      },
    });
    const listener = () => order.push('stop');
    diagnostics.subscribe(RENDER_CHANNELS.stop, listener);
    try {
      const r = await exchange(async (x) => {
        x.res.once('finish', () => order.push('finish'));
        x.res.once('close', () => order.push('close'));
        await deliver(x, contextOf({}, services), REQUEST, HEADERS);
        order.push('settled');
      });
      expect(r.body).toBe('abcd');
    } finally {
      diagnostics.unsubscribe(RENDER_CHANNELS.stop, listener);
    }
    expect(order).toEqual(['finish', 'close', 'stop', 'settled']);
    expect(events).toEqual([
      { channel: RENDER_CHANNELS.stop, data: expect.objectContaining({ outcome: 'ok', bytes: 4 }) },
    ]);
  });

  it('counts a reader that leaves after the last byte was written, but before it was sent, as cancelled', async () => {
    const t = tracking();
    let send!: Send;
    const ctx = contextOf(
      {},
      {
        subscribe: async (_request, _id, onMessage) => {
          send = onMessage;
          return miss('rendering');
        },
      },
      { track: t.track },
    );
    let settled = false;
    let destroyed: boolean | undefined;
    const server = createServer((req, res) => {
      const x = { req, res, head: false, cors: {}, endpoint: 'render', turns: undefined };
      void deliver({ ...x, stage: 'request' } as never, ctx, REQUEST, HEADERS).then(() => {
        settled = true;
        destroyed = res.destroyed;
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const req = request({ host: '127.0.0.1', port, path: '/', agent: false });
      req.on('error', () => {});
      const closed = new Promise<void>((resolve) => req.once('close', () => resolve()));
      const response = new Promise<import('node:http').IncomingMessage>((resolve) =>
        req.once('response', (res) => res.once('data', () => resolve(res))),
      );
      req.end();
      await expect.poll(() => send !== undefined).toBe(true);
      // 16 MiB, far more than the kernel holds for a reader that has stopped, then done.
      const chunk = Buffer.alloc(256 * 1024, 1);
      for (let i = 0; i < 64; i++) send({ type: 'chunk', data: chunk });
      const res = await response;
      res.pause();
      send({ type: 'done', info: { exitStatus: 0, bytes: 64 * chunk.length } });
      await expect.poll(() => t.actors[0]?.actor.getSnapshot().status).toBe('done');
      expect(t.actors[0]!.actor.getSnapshot().output).toMatchObject({ outcome: 'ok' });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(events).toEqual([]); // ended, not delivered: nothing yet
      expect(settled).toBe(false);
      res.destroy();
      await closed;
      await expect.poll(() => settled).toBe(true);
      expect(destroyed).toBe(true);
      expect(events).toEqual([
        {
          channel: RENDER_CHANNELS.stop,
          data: expect.objectContaining({ outcome: 'cancelled', bytes: 64 * chunk.length }),
        },
      ]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
