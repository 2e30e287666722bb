/**
 * The render stage and the routes beside the signed path, each on its own loopback exchange
 * with fake services (no proxy): the render stage ends every waiting-room claim once (with
 * whether the response was torn down) and hands a reserved slot to the render; the waiting-room
 * endpoints (a join needs a signed render path and mints a new session; status and leave know
 * only this process's sessions); `/health` and `/ready` are no-store JSON.
 */
import { describe, expect, it } from 'vitest';
import type { RenderRequest } from '../../../src/core/request.js';
import { sessions } from '../../../src/http/exchange.js';
import type { WaitingRoomEndpoints } from '../../../src/http/services.js';
import { healthStage, readyStage } from '../../../src/http/stages/health.js';
import { queueStage } from '../../../src/http/stages/queue.js';
import { renderStage } from '../../../src/http/stages/render.js';
import { contextOf, exchange } from './harness.js';

const REQUEST = {
  key: 'f:mp3/local://a.wav',
  options: { format: 'mp3' },
  source: {
    source: { scheme: 'local', path: 'a.wav' },
    canonical: 'local://a.wav',
    input: { url: '/a.wav', kind: 'local' },
  },
} as unknown as RenderRequest;

function room(overrides: Partial<WaitingRoomEndpoints> = {}) {
  const calls: string[] = [];
  const endpoints: WaitingRoomEndpoints = {
    join: async (s) => {
      calls.push(`join ${s}`);
      return { type: 'ticket', ticket: { id: 't1', status: 'waiting' } };
    },
    status: async (s) => {
      calls.push(`status ${s}`);
      return { type: 'unknown' };
    },
    leave: async () => ({ type: 'unknown' }),
    claim: async (s) => {
      calls.push(`claim ${s}`);
      return { adoptSlotId: 'room-slot-1' };
    },
    runEnded: (s, cancelled) => calls.push(`runEnded ${s} ${cancelled}`),
    ...overrides,
  };
  return { endpoints, calls };
}

describe('render stage', () => {
  it('adopts a claimed slot and ends the claim once when the delivery settles', async () => {
    const r = room();
    const minted = sessions.mint();
    const seen: RenderRequest[] = [];
    const ctx = contextOf(
      {},
      {
        waitingRoom: r.endpoints,
        subscribe: async (request) => {
          seen.push(request);
          return { type: 'failed', failure: { class: 'queue_full', retryAfterS: 2 } };
        },
      },
    );
    const a = await exchange((x) => renderStage(x, ctx, REQUEST, {}), {
      headers: { cookie: `ap_session=${minted.value}` },
    });
    expect(a.status).toBe(429);
    expect(a.headers['retry-after']).toBe('2');
    expect(seen[0]?.adoptSlotId).toBe('room-slot-1');
    expect(r.calls).toEqual([`claim ${minted.session}`, `runEnded ${minted.session} false`]);
  });

  it('renders without the room for a request with no session of ours', async () => {
    const r = room();
    const ctx = contextOf(
      {},
      {
        waitingRoom: r.endpoints,
        subscribe: async () => ({ type: 'failed', failure: { class: 'render_failed' } }),
      },
    );
    const a = await exchange((x) => renderStage(x, ctx, REQUEST, {}), {
      headers: { cookie: 'ap_session=forged' },
    });
    expect(a.status).toBe(500);
    expect(r.calls).toEqual([]);
  });
});

describe('waiting-room endpoints', () => {
  it('refuses a join without a signed render path, and mints a session for one with it', async () => {
    const r = room();
    const ctx = contextOf({}, { waitingRoom: r.endpoints });
    const bare = await exchange((x) => queueStage(x, ctx, '/api/v1/queue/join', 'POST'), {
      method: 'POST',
      path: '/api/v1/queue/join',
    });
    expect(bare.status).toBeGreaterThanOrEqual(400);
    expect(r.calls).toEqual([]);
    const path = `/api/v1/queue/join?path=${encodeURIComponent('/insecure/f:mp3/plain/local://a.wav')}`;
    const joined = await exchange((x) => queueStage(x, ctx, '/api/v1/queue/join', 'POST'), {
      method: 'POST',
      path,
      headers: { cookie: 'ap_session=planted' },
    });
    expect(joined.status).toBe(200);
    expect(joined.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(joined.body)).toEqual({ id: 't1', status: 'waiting' });
    expect(String(joined.headers['set-cookie'])).toMatch(/^ap_session=/);
    expect(r.calls).toHaveLength(1);
    expect(r.calls[0]).toMatch(/^join /);
  });

  it('knows only its own sessions, and answers 404 for a path or method it does not know', async () => {
    const ctx = contextOf({}, { waitingRoom: room().endpoints });
    for (const [path, method, status] of [
      ['/api/v1/queue/status', 'GET', 404],
      ['/api/v1/queue/ticket', 'DELETE', 404],
      ['/api/v1/queue/other', 'GET', 404],
      ['/api/v1/queue/join', 'GET', 404],
    ] as const) {
      const a = await exchange((x) => queueStage(x, ctx, path, method), { method, path });
      expect(a.status, `${method} ${path}`).toBe(status);
    }
  });
});

describe('health and readiness', () => {
  it('/health: version, ffmpeg and pools as no-store JSON', async () => {
    const ctx = contextOf({}, { pools: () => ({ render: { state: 'running' } }) });
    const a = await exchange((x) => healthStage(x, ctx));
    expect(a.status).toBe(200);
    expect(a.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(a.body)).toEqual({
      status: 'ok',
      version: 'test',
      ffmpeg: { path: '/usr/bin/ffmpeg', source: 'test' },
      pools: { render: { state: 'running' } },
    });
  });

  it('/ready: 200 ready, 503 not_ready', async () => {
    for (const ready of [true, false]) {
      const ctx = contextOf({}, { ready: async () => ({ ready, queued: 3, threshold: 4 }) });
      const a = await exchange((x) => readyStage(x, ctx));
      expect(a.status).toBe(ready ? 200 : 503);
      expect(JSON.parse(a.body)).toEqual({
        status: ready ? 'ready' : 'not_ready',
        queued: 3,
        threshold: 4,
      });
    }
  });
});
