/**
 * The waiting room through real sockets with cookies: a listener who joins gets a session
 * cookie and a ticket; a ready ticket holds a real render slot; the session's render takes that
 * slot over (held stays 1, never 2); when it ends the slot is handed to the next ticket; leaving
 * gives it back. Unknown tickets are 404, a full room is 429 with Retry-After. The room holds
 * one of the two render slots (`AP_WAITING_ROOM_SLOTS` defaults to half); the other is always
 * left to requests without a ticket (see waitingRoomAdmission.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stats } from '../../src/services/semaphoreClient.js';
import { get, type Harness, startHarness, waitFor } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    AP_WAITING_ROOM: '1',
    AP_MAX_CONCURRENCY: '2',
    AP_WAITING_ROOM_MAX_LENGTH: '1',
    AP_WAITING_ROOM_RESERVATION_SECONDS: '30',
    AP_WAITING_ROOM_HEARTBEAT_SECONDS: '30',
  });
});
afterAll(async () => {
  await h.close();
});

/** One waiting-room API call over the harness's raw request, the body as text. */
async function api(method: string, path: string, cookie?: string) {
  const res = await get(h.url, path, { method, ...(cookie ? { headers: { cookie } } : {}) });
  return { status: res.status, headers: res.headers, body: res.body.toString('utf8') };
}

/** The join credential: the signed (here `insecure`, dev mode) path of the render. */
const RENDER_PATH = '/insecure/f:mp3/t:0:1/plain/local://stereo.wav';
const JOIN = `/api/v1/queue/join?path=${encodeURIComponent(RENDER_PATH)}`;

const held = async () => (await stats(h.proxy.actors.semaphore)).held;
/** The slot count as an operator sees it: the scraped gauge. */
const scrapedHeld = async () => {
  const text = (await get(h.metricsUrl, '/metrics')).body.toString();
  return Number(/^audio_proxy_render_slots_held (\d+)$/m.exec(text)?.[1]);
};

describe('waiting room over HTTP', () => {
  it('join, hold a real slot, render on it (1 → 1), hand it on, leave', async () => {
    expect(await scrapedHeld()).toBe(0);
    const a = await api('POST', JOIN);
    expect(a.status).toBe(200);
    const cookieA = String((a.headers['set-cookie'] as string[])[0]).split(';')[0]!;
    expect(String((a.headers['set-cookie'] as string[])[0])).toMatch(/HttpOnly; SameSite=Lax/);
    const ticketA = JSON.parse(a.body);
    expect(ticketA.status).toBe('ready');
    expect(ticketA.ticket_id).toMatch(/^q_/);
    await waitFor(async () => (await scrapedHeld()) === 1);

    const b = await api('POST', JOIN);
    const cookieB = String((b.headers['set-cookie'] as string[])[0]).split(';')[0]!;
    expect(JSON.parse(b.body).status).toBe('queued');
    // the room holds one queued ticket at most: a third listener is turned away
    const c = await api('POST', JOIN);
    expect(c.status).toBe(429);
    expect(Number(c.headers['retry-after'])).toBeGreaterThanOrEqual(1);

    // A renders with its cookie: the render takes the reserved slot over, held stays 1
    const seen: number[] = [];
    const render = get(h.url, RENDER_PATH, {
      headers: { cookie: cookieA },
    });
    const sampler = setInterval(() => {
      void held().then((n) => seen.push(n));
      void scrapedHeld().then((n) => seen.push(n));
    }, 5);
    const r = await render;
    clearInterval(sampler);
    expect(r.status).toBe(200);
    expect(r.complete).toBe(true);
    expect(Math.max(...seen, 1)).toBe(1);

    // A's run ended: the slot is handed to B, still exactly one held
    await waitFor(
      async () =>
        JSON.parse((await api('GET', '/api/v1/queue/status', cookieB)).body).status === 'ready',
    );
    await waitFor(async () => (await held()) === 1);
    expect((await api('GET', '/api/v1/queue/status', cookieA)).status).toBe(404);

    // B leaves: the slot goes back
    expect((await api('DELETE', '/api/v1/queue/ticket', cookieB)).status).toBe(204);
    await waitFor(async () => (await held()) === 0);
    const metrics = await get(h.metricsUrl, '/metrics');
    expect(metrics.body.toString()).toContain('audio_proxy_render_slots_held 0');
  });

  it('404 for a status or leave without a ticket', async () => {
    expect((await api('GET', '/api/v1/queue/status')).status).toBe(404);
    expect(
      (await api('DELETE', '/api/v1/queue/ticket', 'ap_session=AAAAAAAAAAAAAAAAAAAAAAAA')).status,
    ).toBe(404);
  });
});
