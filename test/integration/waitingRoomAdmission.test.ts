/**
 * The waiting room as an attacker meets it, over real sockets (issue #14, item 4):
 * - joining needs the operator's credential (a signed render path), checked like a render URL;
 * - reservations hold at most `AP_WAITING_ROOM_SLOTS` render slots, so 20 joins kept alive by
 *   polling cannot starve signed renders that carry no ticket;
 * - the session id is the server's: a client-chosen `ap_session` is ignored and a fresh one
 *   issued, and the cookie carries `Secure` when `AP_COOKIE_SECURE` is on;
 * - an implicit claim (a session without a ticket rendering with its cookie) ends with a
 *   `runEnded`, so the room's slot never stays `running`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sign } from '../../src/http/signature.js';
import { stats } from '../../src/services/semaphoreClient.js';
import { get, type Harness, startHarness, waitFor } from './harness.js';

const KEY_HEX = '9f'.repeat(32);
const SALT_HEX = '5a'.repeat(16);
const KEY = Buffer.from(KEY_HEX, 'hex');
const SALT = Buffer.from(SALT_HEX, 'hex');

/** The signed path of a render: `/<signature><rest>`. */
function signed(rest: string): string {
  return `/${sign(rest, KEY, SALT)}${rest}`;
}

const RENDER = signed('/f:mp3/t:0:1/plain/local://stereo.wav');

interface ApiResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One waiting-room API call over the harness's raw request, the body as text. */
async function api(
  base: string,
  method: string,
  path: string,
  cookie?: string,
): Promise<ApiResponse> {
  const res = await get(base, path, { method, ...(cookie ? { headers: { cookie } } : {}) });
  return { status: res.status, headers: res.headers, body: res.body.toString('utf8') };
}

function joinPath(credential: string): string {
  return `/api/v1/queue/join?path=${encodeURIComponent(credential)}`;
}

function setCookie(r: ApiResponse): string | undefined {
  const all = r.headers['set-cookie'];
  return Array.isArray(all) ? all[0] : undefined;
}

/** The `name=value` part of the response's cookie (what a browser sends back). */
function cookieOf(r: ApiResponse): string {
  const line = setCookie(r);
  if (line === undefined) throw new Error(`no Set-Cookie on a ${r.status}`);
  return line.split(';')[0]!;
}

describe('waiting room admission', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      AP_KEY: KEY_HEX,
      AP_SALT: SALT_HEX,
      AP_ALLOW_INSECURE: '0',
      AP_MAX_CONCURRENCY: '2',
      AP_RENDER_TIMEOUT: '3',
      AP_WAITING_ROOM: '1',
      AP_WAITING_ROOM_RESERVATION_SECONDS: '30',
      AP_WAITING_ROOM_HEARTBEAT_SECONDS: '30',
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  const held = async () => (await stats(h.proxy.actors.semaphore)).held;
  const roomSlots = () => h.proxy.waitingRoom!.room.getSnapshot().context.slots;
  const statusOf = async (cookie: string) => api(h.url, 'GET', '/api/v1/queue/status', cookie);
  const leave = async (cookie: string) => api(h.url, 'DELETE', '/api/v1/queue/ticket', cookie);

  it('refuses a join without the operator’s credential: 401 as for a bad signature', async () => {
    const bare = await api(h.url, 'POST', '/api/v1/queue/join');
    expect(bare.status).toBe(401);
    expect(JSON.parse(bare.body).error).toBe('invalid_signature');
    expect(setCookie(bare)).toBeUndefined();

    const forged = await api(
      h.url,
      'POST',
      joinPath(`/${'A'.repeat(43)}/f:mp3/t:0:1/plain/local://stereo.wav`),
    );
    expect(forged.status).toBe(401);
    // the dev literal is refused while AP_ALLOW_INSECURE is off
    const insecure = await api(
      h.url,
      'POST',
      joinPath('/insecure/f:mp3/t:0:1/plain/local://stereo.wav'),
    );
    expect(insecure.status).toBe(401);
    // a signature over a different path does not transfer
    const moved = RENDER.replace('t:0:1', 't:0:2');
    expect((await api(h.url, 'POST', joinPath(moved))).status).toBe(401);
    // nothing was booked by any of them
    expect(await held()).toBe(0);
  });

  it('honours exp like a render URL: an expired credential is 410', async () => {
    const past = Math.floor(Date.now() / 1000) - 60;
    const r = await api(
      h.url,
      'POST',
      joinPath(signed(`/f:mp3/exp:${past}/t:0:1/plain/local://stereo.wav`)),
    );
    expect(r.status).toBe(410);
    expect(JSON.parse(r.body).error).toBe('expired');
  });

  it('issues the session id itself: a client-chosen ap_session is ignored', async () => {
    const chosen = 'ap_session=AAAAAAAAAAAAAAAAAAAAAAAA';
    const r = await api(h.url, 'POST', joinPath(RENDER), chosen);
    expect(r.status).toBe(200);
    const issued = cookieOf(r);
    expect(issued).not.toBe(chosen);
    expect(setCookie(r)).toMatch(/; HttpOnly/);
    expect(setCookie(r)).not.toMatch(/; Secure/); // AP_COOKIE_SECURE is off here
    // the chosen value names no ticket; the issued one does
    expect((await statusOf(chosen)).status).toBe(404);
    expect((await statusOf(issued)).status).toBe(200);
    // a join with the issued cookie is the same ticket, and no new cookie
    const again = await api(h.url, 'POST', joinPath(RENDER), issued);
    expect(JSON.parse(again.body).ticket_id).toBe(JSON.parse(r.body).ticket_id);
    expect(setCookie(again)).toBeUndefined();
    // a forged id with a plausible tag is refused too
    const [, value] = issued.split('=');
    const forged = `ap_session=${'B'.repeat(24)}.${value!.split('.')[1]}`;
    expect((await statusOf(forged)).status).toBe(404);
    expect((await leave(issued)).status).toBe(204);
    await waitFor(async () => (await held()) === 0);
    // a new ticket gets a new session even under a cookie this process minted (one planted by
    // whoever joined with it first names none of the joiner's tickets)
    const rejoined = await api(h.url, 'POST', joinPath(RENDER), issued);
    expect(rejoined.status).toBe(200);
    const fresh = cookieOf(rejoined);
    expect(fresh).not.toBe(issued);
    expect((await statusOf(issued)).status).toBe(404);
    expect((await leave(fresh)).status).toBe(204);
    await waitFor(async () => (await held()) === 0);
  });

  it('ends an implicit claim: a session that left and renders does not keep the room slot', async () => {
    const a = await api(h.url, 'POST', joinPath(RENDER));
    expect(JSON.parse(a.body).status).toBe('ready');
    const cookieA = cookieOf(a);
    expect((await leave(cookieA)).status).toBe(204);
    // A renders with its cookie and no ticket: an implicit claim of the idle room slot
    const r = await get(h.url, RENDER, { headers: { cookie: cookieA } });
    expect(r.status).toBe(200);
    expect(r.complete).toBe(true);
    // the run was reported over: no room slot is left `running`
    await waitFor(() => roomSlots().every((s) => s.phase !== 'running'), 3_000);
    // B joins after A's render is over: the room slot must be free again
    const b = await api(h.url, 'POST', joinPath(RENDER));
    expect(b.status).toBe(200);
    const cookieB = cookieOf(b);
    await waitFor(async () => JSON.parse((await statusOf(cookieB)).body).status === 'ready', 3_000);
    expect((await leave(cookieB)).status).toBe(204);
    await waitFor(async () => (await held()) === 0);
  });

  it('20 joins kept alive by polling leave signed renders served', async () => {
    const cookies: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await api(h.url, 'POST', joinPath(RENDER));
      expect(r.status).toBe(200);
      cookies.push(cookieOf(r));
    }
    const poll = setInterval(() => {
      for (const c of cookies) void statusOf(c);
    }, 500);
    try {
      const maxRoomHeld: number[] = [];
      const sampler = setInterval(() => {
        void held().then((n) => maxRoomHeld.push(n));
      }, 20);
      try {
        // three signed renders without a ticket, one after another, each served in full
        for (let i = 0; i < 3; i++) {
          const r = await get(h.url, RENDER);
          expect(r.status).toBe(200);
          expect(r.complete).toBe(true);
        }
      } finally {
        clearInterval(sampler);
      }
      // the room's reservations never held more than their share (one of two slots), plus
      // the one render
      expect(Math.max(...maxRoomHeld)).toBeLessThanOrEqual(2);
    } finally {
      clearInterval(poll);
      for (const c of cookies) await leave(c);
    }
    await waitFor(async () => (await held()) === 0);
  }, 30_000);
});

describe('waiting room cookie with AP_COOKIE_SECURE', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ AP_WAITING_ROOM: '1', AP_COOKIE_SECURE: '1' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('marks the session cookie Secure', async () => {
    const r = await api(h.url, 'POST', joinPath('/insecure/f:mp3/t:0:1/plain/local://stereo.wav'));
    expect(r.status).toBe(200);
    expect(setCookie(r)).toMatch(/; Secure/);
    expect((await api(h.url, 'DELETE', '/api/v1/queue/ticket', cookieOf(r))).status).toBe(204);
  });
});
